package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// ChildEnv names the environment variable that tells a re-executed test
// binary which role to play.
const ChildEnv = "DIO_TEST_CHILD"

// Child returns the role this process was started for by RunChild, or "".
func Child() string { return os.Getenv(ChildEnv) }

// InChild reports whether this process is the child playing role. If it
// is not, it runs the test t in a child with that role, fails t unless the
// child passes, and returns false: the caller returns at once. The child
// does what cannot be undone in a test process (a seccomp filter, dropped
// capabilities, lowered limits).
func InChild(t *testing.T, role string) bool {
	t.Helper()
	if Child() == role {
		return true
	}
	out, err := RunChild(t, t.Name(), role)
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child %q did not pass (%v):\n%s", role, err, out)
	}
	return false
}

// RunChild re-executes the test binary to run only the test named test, with
// ChildEnv set to role and the matrix variables passed on. It returns the
// child's combined output and its error.
func RunChild(t testing.TB, test, role string, env ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), ChildEnv+"="+role)
	cmd.Env = append(cmd.Env, env...)
	return cmd.CombinedOutput()
}
