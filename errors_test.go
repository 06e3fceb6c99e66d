package dio_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// publicPackages are the packages a service imports, whose error values
// it sees.
var publicPackages = []string{"aligned", "direct", "faults", "fallback", "blobio", "ephemeral"}

// TestSentinelsNamePackage: every exported error value of a public package
// that errors.New or fmt.Errorf makes says which package it comes from
// ("direct: negative offset"), as the standard library's do, so that an
// error wrapped three times still names its source (issue 16: two of
// direct's lacked the prefix). It reads the source, so that a sentinel
// added later is checked too, on every platform's files.
func TestSentinelsNamePackage(t *testing.T) {
	n := 0
	for _, dir := range publicPackages {
		found, problems, err := checkSentinels(dir)
		if err != nil {
			t.Fatal(err)
		}
		n += found
		for _, p := range problems {
			t.Error(p)
		}
	}
	if n < 15 {
		t.Errorf("found only %d sentinels: is the check still reading the right files?", n)
	}
}

// TestSentinelsCatches runs the check on a package with a sentinel that
// lacks its prefix, so that TestSentinelsNamePackage can fail.
func TestSentinelsCatches(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "direct")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := `package direct

import ("errors"; "fmt"; "io/fs")

var ErrGood = errors.New("direct: good")
var (
	ErrBad    = errors.New("negative offset")
	ErrWrapped = fmt.Errorf("closed: %w", fs.ErrClosed)
	errHidden = errors.New("unexported: not a user's")
)
`
	if err := os.WriteFile(filepath.Join(dir, "e.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	found, problems, err := checkSentinels(dir)
	if err != nil {
		t.Fatal(err)
	}
	if found != 3 || len(problems) != 2 || !strings.Contains(problems[0], "ErrBad") || !strings.Contains(problems[1], "ErrWrapped") {
		t.Errorf("found %d, problems %q; want 3 found, ErrBad and ErrWrapped", found, problems)
	}
}

// checkSentinels reads the non-test files in dir and returns how many
// exported Err variables errors.New or fmt.Errorf make there, and one
// problem for each whose text does not begin with the package's name.
func checkSentinels(dir string) (int, []string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return 0, nil, err
	}
	fset := token.NewFileSet()
	found := 0
	var problems []string
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return 0, nil, err
		}
		prefix := f.Name.Name + ": "
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !name.IsExported() || !strings.HasPrefix(name.Name, "Err") || i >= len(vs.Values) {
						continue
					}
					text, ok := errorText(vs.Values[i])
					if !ok {
						continue
					}
					found++
					if !strings.HasPrefix(text, prefix) {
						problems = append(problems, fmt.Sprintf("%s: %s.%s is %q, without the %q prefix",
							fset.Position(name.Pos()), f.Name.Name, name.Name, text, prefix))
					}
				}
			}
		}
	}
	return found, problems, nil
}

// errorText returns the format or text of an errors.New or fmt.Errorf
// call with a literal first argument.
func errorText(e ast.Expr) (string, bool) {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok || !(pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf") {
		return "", false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	text, err := strconv.Unquote(lit.Value)
	return text, err == nil
}
