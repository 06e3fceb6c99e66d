package dio_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMakefileCommands checks what the README's two commands print of
// themselves (make -n, nothing run): make run's bench line has single
// spaces with BENCH empty or set (issue 24: "bench  /tmp"), and make
// test's allocation step names exactly the packages with TestXxxAllocs
// tests, so that it prints no "[no tests to run]" for the others.
func TestMakefileCommands(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make is not installed")
	}
	dryRun := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(mk, append([]string{"-n"}, args...)...)
		cmd.Env = append(os.Environ(), "BENCH=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, tc := range []struct{ bench, want string }{
		{"", "bin/dio-check bench /some/dir\n"},
		{"BENCH=-size 8MiB", "bin/dio-check bench -size 8MiB /some/dir\n"},
	} {
		args := []string{"run", "DIR=/some/dir"}
		if tc.bench != "" {
			args = append(args, tc.bench)
		}
		if out := dryRun(args...); !strings.Contains(out, tc.want) {
			t.Errorf("make -n %s: no %q in:\n%s", strings.Join(args, " "), tc.want, out)
		}
	}

	var want []string
	err = filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "pebblefs" || d.Name() == "crashtest" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && p != ".") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if regexp.MustCompile(`(?m)^func Test\w*Allocs\(`).Match(src) {
			want = append(want, "./"+filepath.ToSlash(filepath.Dir(p))+"/")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	m := regexp.MustCompile(`(?m)^go test -count=1 -run 'Allocs' (.*?)\s+#`).FindStringSubmatch(dryRun("test"))
	if m == nil {
		t.Fatalf("make -n test has no allocation step:\n%s", dryRun("test"))
	}
	got := strings.Fields(m[1])
	if !slices.Equal(got, want) {
		t.Errorf("make test's allocation step runs %v; the packages with Allocs tests are %v", got, want)
	}
}
