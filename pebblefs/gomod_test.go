//go:build unix

package pebblefs

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dio-storage/dio/internal/testenv"
)

const (
	dioModule      = "github.com/dio-storage/dio"
	pebblefsModule = dioModule + "/pebblefs"
)

// requiredDio returns the version of dio that pebblefs/go.mod requires.
func requiredDio(t *testing.T) string {
	t.Helper()
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(dioModule) + `\s+(v\S+)\s*$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("pebblefs/go.mod does not require " + dioModule)
	}
	return string(m[1])
}

// TestVersionScheme: pebblefs requires a dio release that exists, the
// version its own tag carries (dio vX.Y.Z and pebblefs/vX.Y.Z are cut
// together from one commit), never v0.0.0 or a pseudo-version, which no
// proxy serves.
func TestVersionScheme(t *testing.T) {
	v := requiredDio(t)
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(v) || v == "v0.0.0" {
		t.Fatalf("pebblefs/go.mod requires dio %s: want the release vX.Y.Z that pebblefs/vX.Y.Z is tagged with", v)
	}
}

// TestGoGet builds a program outside the tree against pebblefs as a
// user gets it: a module proxy (a file:// directory) serving this tree
// as dio and pebblefs at the version pebblefs/go.mod requires, as their
// tags would, beside the module cache for everything else, with no
// network and no replace directive (a user's build ignores pebblefs's).
// The program opens Pebble on pebblefs.New(nil), writes, reads back.
func TestGoGet(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles Pebble into a fresh module cache (about 3 minutes the first time): run without -short")
	}
	if os.Getenv(testenv.DirEnv) != "" {
		t.Skip("a filesystem matrix leg: the module scheme does not depend on the filesystem")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	modCache := strings.TrimSpace(run(t, "", nil, goBin, "env", "GOMODCACHE"))
	goProxy := strings.TrimSpace(run(t, "", nil, goBin, "env", "GOPROXY"))
	version := requiredDio(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	publish(t, proxy, dioModule, version, root)
	publish(t, proxy, pebblefsModule, version, filepath.Join(root, "pebblefs"))

	user := t.TempDir()
	write(t, filepath.Join(user, "go.mod"), "module example.com/user\n\ngo 1.26.0\n")
	write(t, filepath.Join(user, "main.go"), `package main

import (
	"fmt"
	"log"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/dio-storage/dio/pebblefs"
)

func main() {
	db, err := pebble.Open(os.Args[1], &pebble.Options{FS: pebblefs.New(nil)})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Set([]byte("hello"), []byte("world"), pebble.Sync); err != nil {
		log.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		log.Fatal(err)
	}
	v, closer, err := db.Get([]byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("hello %s\n", v)
	closer.Close()
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
}
`)
	env := []string{
		// The tree's module cache serves what building pebblefs fetched; the
		// configured proxy, last, the go.mod files of modules the build
		// prunes, which a fresh machine's cache lacks.
		"GOPROXY=file://" + proxy + ",file://" + filepath.Join(modCache, "cache", "download") + "," + goProxy,
		"GOFLAGS=-mod=mod",
		"GOSUMDB=off",
		"GONOSUMDB=" + dioModule,
		"GOPRIVATE=",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOMODCACHE=" + t.TempDir(), // what the user downloads, not the tree's cache
	}
	run(t, user, env, goBin, "get", pebblefsModule+"@"+version)
	mod, err := os.ReadFile(filepath.Join(user, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{pebblefsModule + " " + version, dioModule + " " + version} {
		if !bytes.Contains(mod, []byte(want)) {
			t.Errorf("the user's go.mod lacks %q:\n%s", want, mod)
		}
	}
	bin := filepath.Join(user, "user")
	run(t, user, env, goBin, "build", "-trimpath", "-o", bin, ".") // -trimpath: the build cache serves the next run, whatever GOMODCACHE
	if out := run(t, user, nil, bin, testenv.Dir(t)); out != "hello world\n" {
		t.Fatalf("the program printed %q", out)
	}
	// The module cache the user filled is read-only, as go leaves it.
	_ = filepath.WalkDir(env[len(env)-1][len("GOMODCACHE="):], func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
}

// run runs a command in dir with env added and returns its output,
// failing the test with it when the command fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

func write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// publish lays out module at version in proxy as a module proxy serves
// it (list, .info, .mod, .zip under module/@v/), its files those of dir
// without nested modules (any directory below dir with a go.mod of its
// own, as the go command leaves them out), dot directories or files
// git does not track.
func publish(t *testing.T, proxy, module, version, dir string) {
	t.Helper()
	at := filepath.Join(proxy, filepath.FromSlash(module), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC()})
	write(t, filepath.Join(at, "list"), version+"\n")
	write(t, filepath.Join(at, version+".info"), string(info))
	write(t, filepath.Join(at, version+".mod"), string(mod))

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	prefix := module + "@" + version + "/"
	files := gitFiles(dir)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if p == dir {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !d.Type().IsRegular() || files != nil && !files[rel] {
			return nil
		}
		w, err := zw.Create(prefix + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at, version+".zip"), buf.String())
}

// gitFiles returns the files git would commit under dir (tracked, or
// new and not ignored), or nil where git cannot tell: build artefacts
// stay out of the zip.
func gitFiles(dir string) map[string]bool {
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	files := map[string]bool{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files[filepath.FromSlash(f)] = true
		}
	}
	return files
}
