package crashtest_test

import (
	"os"
	"regexp"
	"testing"
)

// TestVersionScheme: crashtest's go.mod requires dio and pebblefs at the
// release they are tagged with together (vX.Y.Z, pebblefs/vX.Y.Z), not
// v0.0.0, which a user's `go get` of crashtest could not resolve (the
// replace directives serve this tree only).
func TestVersionScheme(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^\s*(github\.com/dio-storage/dio(?:/pebblefs)?) (\S+)\s*$`)
	found := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(mod), -1) {
		found[m[1]] = m[2]
	}
	dio := found["github.com/dio-storage/dio"]
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(dio) || dio == "v0.0.0" {
		t.Fatalf("crashtest/go.mod requires dio %q: want the release vX.Y.Z", dio)
	}
	if p := found["github.com/dio-storage/dio/pebblefs"]; p != dio {
		t.Fatalf("crashtest/go.mod requires pebblefs %q and dio %q: want the same release of both", p, dio)
	}
}
