package fileio_test

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dio-storage/dio/fileio"
)

// TestDocListsOptions: the package doc's API section names every field
// of Options, in order (issue 34: it left out NoDirSync).
func TestDocListsOptions(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`//\tOptions\{([^}]*)\}`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("doc.go lists no Options{...}")
	}
	listed := strings.Split(strings.ReplaceAll(string(m[1]), " ", ""), ",")
	var fields []string
	for f := range reflect.TypeFor[fileio.Options]().Fields() {
		fields = append(fields, f.Name)
	}
	if !slices.Equal(listed, fields) {
		t.Errorf("doc.go lists Options{%s}, the type has {%s}", strings.Join(listed, ", "), strings.Join(fields, ", "))
	}
}
