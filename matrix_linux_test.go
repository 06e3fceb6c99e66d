package dio_test

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// TestMatrixSkipsLegsOneByOne runs scripts/test-matrix.sh, as make test
// does as root, where mkfs.xfs and mkfs.btrfs cannot run (a /dev/null
// mounted over each, in a mount namespace of the test's own): the tmpfs
// leg, which needs no tool, still runs and passes, the other two are
// skipped and named, and the run succeeds, unless MATRIX_STRICT=1 (CI)
// makes a skipped leg fail it. Each leg runs an empty go test, so this
// checks the script, not the suite.
func TestMatrixSkipsLegsOneByOne(t *testing.T) {
	switch {
	case os.Getenv("DIO_TEST_FS") != "":
		t.Skip("inside a matrix leg already")
	case os.Geteuid() != 0:
		t.Skip("the matrix mounts filesystems: needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1) to hide the tools in a mount namespace of our own")
	}
	hide := `set -e
for t in mkfs.xfs mkfs.btrfs; do
	if p=$(PATH="$PATH:/usr/sbin:/sbin" command -v "$t"); then mount --bind /dev/null "$p"; fi
done
exec scripts/test-matrix.sh -count=1 -run '^$' ./aligned`
	run := func(env ...string) (string, int) {
		cmd := exec.Command(unshare, "--mount", "--propagation", "private", "bash", "-c", hide)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Skipf("cannot run the matrix in a mount namespace here: %v: %s", err, out)
		}
		return string(out), 0
	}

	out, code := run("MATRIX_LEGS=tmpfs xfs btrfs", "MATRIX_STRICT=")
	if code != 0 {
		t.Fatalf("exit %d, want 0: a skipped leg fails the run:\n%s", code, out)
	}
	for _, want := range []string{
		`(?m)^=== matrix leg: xfs \(4096-byte sectors\): skipped: mkfs\.xfs not found \(install xfsprogs\) ===$`,
		`(?m)^matrix: tmpfs +PASS`,
		`(?m)^matrix: xfs \(4096-byte sectors\) +SKIP: mkfs\.xfs not found`,
		`(?m)^matrix: btrfs +SKIP: mkfs\.btrfs not found`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no line matching %s in:\n%s", want, out)
		}
	}

	out, code = run("MATRIX_LEGS=xfs", "MATRIX_STRICT=1")
	if code != 1 || !regexp.MustCompile(`(?m)^matrix: MATRIX_STRICT=1: the skipped xfs leg fails the run$`).MatchString(out) {
		t.Errorf("MATRIX_STRICT=1 with a skipped leg: exit %d, want 1 and the reason:\n%s", code, out)
	}

	out, code = run("MATRIX_LEGS=tmpfs zfs")
	if code != 2 || !regexp.MustCompile(`unknown leg 'zfs'`).MatchString(out) {
		t.Errorf("an unknown leg: exit %d, want 2 and its name:\n%s", code, out)
	}
}
