package dio_test

import (
	"bufio"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layers are the module's production packages, lowest first, as DESIGN.md
// and the README draw them: cmd → ephemeral → blobio ∥ fileio →
// appender ∥ reader → fallback → direct → aligned. A package imports only
// packages of the layers before its own, so the arrows point down the
// list; packages that share a layer (∥) import none of each other. A
// pattern ending in "/..." is every package under that directory.
var layers = [][]string{
	{"aligned"},
	{"direct"},
	{"faults"}, // fault plans, which direct's files and queues consult
	{"fallback"},
	{"internal/appender", "internal/reader"}, // the writer core ∥ the reader core
	{"fileio", "blobio"},                     // plain bytes ∥ blobs: two faces of the cores
	{"ephemeral"},
	{"pebblefs"},                   // a nested module (Pebble stays out of dio's go.mod), layered all the same
	{"pebblefs/cmd/..."},           // pebble-bench
	{"cmd/dio-check/internal/..."}, // dio-check's own: ingest, the bench workload
	{"cmd/dio-check"},
	{"examples/..."}, // nested modules a service copies (examples/promdio: Prometheus stays out of dio's go.mod)
}

// benchKit are the packages the commands measure with (cgroups, fio, the
// page cache): they import nothing of the module, and only the commands
// import them, so that no measuring code reaches the library.
var benchKit = []string{"internal/cgroup", "internal/benchkit"}

// commands are where the packages that may import the bench kit live.
var commands = []string{"cmd/", "pebblefs/cmd/"}

// testSupport are the packages that exist for tests: they may import any
// production layer (below cmd), and no production package imports them.
var testSupport = []string{
	"internal/testenv",     // test directories, the filesystem matrix's environment
	"internal/filetest",    // the file conformance suite direct and fallback share
	"internal/reliability", // crash, full-disk and load tests; no code but tests
	"crashtest",            // a nested module (go-fuse stays out of dio's go.mod): the crash-state replay, for dio's tests and its users'
}

// TestLayers fails when a non-test file of the module imports a package at
// or above its own layer, or a test support package, or when a package is in
// no layer: a new package takes its place in the list above.
func TestLayers(t *testing.T) {
	// The module's internal/ holds what the layers above share, not what
	// uses them: nothing there may import blobio, ephemeral or the command.
	blobio, _ := layerOf("blobio")
	for i, l := range layers {
		for _, pkg := range l {
			if strings.HasPrefix(pkg, "internal/") && i >= blobio {
				t.Errorf("layer %s is at or above blobio's: a package that imports blobio or ephemeral lives beside its user, not in internal/", pkg)
			}
		}
	}
	problems, err := checkLayers(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestLayersCatches runs the check on a small tree with an import that
// points up, one between packages of a layer, a package in no layer, and
// the bench kit imported by the library and importing it, so that
// TestLayers can fail.
func TestLayersCatches(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("aligned/a.go", "package aligned\n")
	write("direct/d.go", "package direct\n\nimport _ \"example.com/m/aligned\"\n")
	write("direct/d_test.go", "package direct\n\nimport _ \"example.com/m/blobio\"\n") // tests may
	write("fallback/f_linux.go", "package fallback\n\nimport _ \"example.com/m/blobio\"\n")
	write("blobio/b.go", "package blobio\n\nimport _ \"example.com/m/internal/testenv\"\n")
	write("internal/testenv/e.go", "package testenv\n\nimport _ \"example.com/m/blobio\"\n")
	write("internal/ingest/i.go", "package ingest\n")
	write("blobio/testdata/x.go", "package x\n\nimport _ \"example.com/m/cmd/dio-check\"\n")
	write("fileio/f.go", "package fileio\n\nimport _ \"example.com/m/blobio\"\n")
	write("internal/benchkit/k.go", "package benchkit\n\nimport _ \"example.com/m/fallback\"\n")
	write("ephemeral/e.go", "package ephemeral\n\nimport _ \"example.com/m/internal/cgroup\"\n")
	write("cmd/dio-check/m.go", "package main\n\nimport _ \"example.com/m/internal/cgroup\"\n") // the command may

	problems, err := checkLayers(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"blobio/b.go imports internal/testenv, which is test support",
		"ephemeral/e.go imports internal/cgroup, which is the bench kit: only commands import it",
		"fallback/f_linux.go imports blobio, which is not below it (fallback is layer 3, blobio layer 5)",
		"fileio/f.go imports blobio, which is not below it (fileio is layer 5, blobio layer 5)",
		"internal/benchkit/k.go imports fallback: the bench kit imports nothing of the module",
		"internal/ingest is in no layer: give it one in layers_test.go",
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
}

// checkLayers parses the imports of every non-test Go file under root, a
// module's directory, whatever its build constraints, and returns each
// import that breaks the layering.
func checkLayers(root string) ([]string, error) {
	module, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	var problems []string
	misplaced := map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
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
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		pkg := path.Dir(rel)
		if pkg == "." {
			// The root package is documentation (doc.go): which package
			// to import. It imports nothing of the module, so that it
			// pulls no layer into a program that names it.
			problems = append(problems, rootImports(fset, p, module)...)
			return nil
		}
		rank, support := layerOf(pkg)
		kit := slices.Contains(benchKit, pkg)
		if rank < 0 && !support && !kit {
			if !misplaced[pkg] {
				misplaced[pkg] = true
				problems = append(problems, pkg+" is in no layer: give it one in layers_test.go")
			}
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue // outside the module
			}
			depRank, depSupport := layerOf(dep)
			command := slices.ContainsFunc(commands, func(c string) bool { return strings.HasPrefix(pkg, c) })
			switch {
			case kit:
				problems = append(problems, fmt.Sprintf("%s imports %s: the bench kit imports nothing of the module", rel, dep))
			case slices.Contains(benchKit, dep) && !command && !support:
				problems = append(problems, fmt.Sprintf("%s imports %s, which is the bench kit: only commands import it", rel, dep))
			case slices.Contains(benchKit, dep):
			case depSupport && !support:
				problems = append(problems, fmt.Sprintf("%s imports %s, which is test support", rel, dep))
			case depSupport:
			case support && depRank == len(layers)-1:
				problems = append(problems, fmt.Sprintf("%s imports %s, the command", rel, dep))
			case support:
			case depRank < 0:
				problems = append(problems, fmt.Sprintf("%s imports %s, which is in no layer", rel, dep))
			case depRank >= rank:
				problems = append(problems, fmt.Sprintf("%s imports %s, which is not below it (%s is layer %d, %s layer %d)", rel, dep, pkg, rank, dep, depRank))
			}
		}
		return nil
	})
	slices.Sort(problems)
	return problems, err
}

// rootImports returns a problem for every import of the module in p, a
// file of the root package.
func rootImports(fset *token.FileSet, p, module string) []string {
	f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, spec := range f.Imports {
		if imp, _ := strconv.Unquote(spec.Path.Value); imp == module || strings.HasPrefix(imp, module+"/") {
			problems = append(problems, fmt.Sprintf("%s imports %s: the root package is documentation and imports nothing of the module", filepath.Base(p), imp))
		}
	}
	if len(f.Imports) > 0 && len(problems) == 0 {
		problems = append(problems, filepath.Base(p)+": the root package is documentation and imports nothing")
	}
	return problems
}

// layerOf returns the index in layers of pkg's layer, or -1, and whether
// it is test support.
func layerOf(pkg string) (rank int, support bool) {
	if slices.Contains(testSupport, pkg) {
		return -1, true
	}
	for i, l := range layers {
		for _, p := range l {
			if dir, ok := strings.CutSuffix(p, "/..."); ok && strings.HasPrefix(pkg, dir+"/") || pkg == p {
				return i, false
			}
		}
	}
	return -1, false
}

// modulePath reads the module line of a go.mod.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", errors.New(gomod + ": no module line")
}
