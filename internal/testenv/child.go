package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// ChildEnv names the environment variable that tells a re-executed test
// binary which role to play.
const ChildEnv = "DIO_TEST_CHILD"

// Child returns the role this process was started for by RunChild, or "".
func Child() string { return os.Getenv(ChildEnv) }

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
