package dio_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function of production code may be, its
// signature and closing brace included: past it, a function does several
// things, and a reader has to hold them all at once (issue 34).
const maxFuncLines = 150

// TestFunctionLength fails for a function or method longer than
// maxFuncLines in a non-test file of the module (commands and the nested
// modules included; scripts/ and testdata are left out, as go's ./...
// leaves out directories starting with _ or .).
func TestFunctionLength(t *testing.T) {
	long, err := longFunctions(".", maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range long {
		t.Error(l)
	}
}

// TestFunctionLengthCatches runs the check on a file with a long
// function, so that TestFunctionLength can fail.
func TestFunctionLengthCatches(t *testing.T) {
	dir := t.TempDir()
	body := "package p\n\nfunc short() {}\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines-1) + "}\n"
	writeFile(t, filepath.Join(dir, "p.go"), body)
	writeFile(t, filepath.Join(dir, "p_test.go"), "package p\n\nfunc longTest() {\n"+strings.Repeat("\t_ = 1\n", 2*maxFuncLines)+"}\n")
	long, err := longFunctions(dir, maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("p.go:5: long is %d lines, more than %d", maxFuncLines+1, maxFuncLines)}
	if !slices.Equal(long, want) {
		t.Errorf("got %q, want %q", long, want)
	}
}

// longFunctions returns every function of a non-test Go file under root
// longer than limit lines.
func longFunctions(root string, limit int) ([]string, error) {
	var long []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		ast.Inspect(f, func(n ast.Node) bool {
			fd, ok := n.(*ast.FuncDecl)
			if !ok {
				return true
			}
			from, to := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
			if n := to - from + 1; n > limit {
				long = append(long, fmt.Sprintf("%s:%d: %s is %d lines, more than %d", filepath.ToSlash(rel), from, fd.Name.Name, n, limit))
			}
			return false
		})
		return nil
	})
	slices.Sort(long)
	return long, err
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
