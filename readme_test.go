package dio_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dio-storage/dio/internal/testenv"
)

// TestReadmeProgram builds the README's first Go block as a program of
// its own, in a module outside this one that requires dio (replaced by
// this checkout), as a user who copies it would, and runs it: the first
// program a newcomer sees compiles as written and does what its comments
// say.
func TestReadmeProgram(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not installed")
	}
	if testing.Short() {
		t.Skip("builds a program: not in -short")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```go block")
	}
	src := m[1]
	if !bytes.HasPrefix(src, []byte("package main\n")) {
		t.Fatal("the README's first Go block is not a program (package main)")
	}
	repo, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	gomod := "module example.com/first\n\ngo 1.26\n\nrequire github.com/dio-storage/dio v0.0.0\n\nreplace github.com/dio-storage/dio => " + repo + "\n"
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": src} {
		if err := os.WriteFile(filepath.Join(mod, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(mod, "first")
	build := exec.Command(goTool, "build", "-mod=mod", "-o", bin, ".")
	build.Dir = mod
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the README's program does not build: %v\n%s", err, out)
	}

	run := exec.Command(bin)
	run.Env = append(os.Environ(), "TMPDIR="+testenv.Dir(t))
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's program failed: %v\n%s", err, out)
	}
	for _, want := range []string{"writing with ", "blob at 10: beta", "scanned 0: alpha", "scanned 10: beta", "scanned 19: gamma", "bytes at 11: any "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README's program printed no %q:\n%s", want, out)
		}
	}
}

// TestReadmeClosesWhatItOpens: the README's first program closes every
// Writer, Reader and Scanner it makes (issue 34: it left its Scanner
// open), so that a newcomer who copies it copies the habit.
func TestReadmeClosesWhatItOpens(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```go block")
	}
	src := string(m[1])
	made := regexp.MustCompile(`(\w+), err :?= \w+\.(?:Create|Open)\(|(\w+) := blobio\.NewScanner\(`).FindAllStringSubmatch(src, -1)
	if len(made) < 5 {
		t.Fatalf("found %d of the program's writers, readers and scanners", len(made))
	}
	for _, v := range made {
		name := v[1] + v[2]
		if !strings.Contains(src, name+".Close()") {
			t.Errorf("the README's program never closes %s", name)
		}
	}
}
