package crashtest

import (
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
)

// A janitor undoes what the harness made (mounts, loop devices) even when
// the process dies without running its own cleanup: a go test timeout, a
// signal, SIGKILL. It is a shell that outlives the process: it is told of
// each mount and device as it is made and forgotten as it is undone, and
// when its input closes (the process exited, however) it unmounts
// (lazily) and detaches whatever is left, newest first. Signals do not
// reach it: it runs in a process group of its own and ignores them.
type janitor struct {
	mu   sync.Mutex
	in   io.WriteCloser
	cmd  *exec.Cmd
	next int
}

// janitorScript reads "+ ID KIND PATH" and "- ID" lines; at end of input it
// undoes every item still there, last added first.
const janitorScript = `
trap '' INT TERM HUP QUIT PIPE
export PATH="$PATH:/usr/sbin:/sbin:/usr/bin:/bin"
declare -A todo
order=()
while read -r op id kind path; do
	case $op in
	+) todo[$id]="$kind $path"; order+=("$id") ;;
	-) unset "todo[$id]" ;;
	esac
done
for ((i=${#order[@]}-1; i>=0; i--)); do
	item=${todo[${order[i]}]:-}
	[ -n "$item" ] || continue
	kind=${item%% *} path=${item#* }
	case $kind in
	mount) umount -l "$path" ;;
	loop) losetup -d "$path" ;;
	dir) rmdir "$path" ;;
	esac 2>/dev/null
done
exit 0
`

func startJanitor() (*janitor, error) {
	cmd := exec.Command("bash", "-c", janitorScript)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("crashtest: starting the cleanup shell: %w", err)
	}
	return &janitor{in: in, cmd: cmd}, nil
}

// add tells the janitor of something to undo (kind: mount, loop or dir)
// and returns the id that forget takes.
func (j *janitor) add(kind, path string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.next++
	fmt.Fprintf(j.in, "+ %d %s %s\n", j.next, kind, path)
	return j.next
}

// forget tells the janitor that id was undone.
func (j *janitor) forget(id int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	fmt.Fprintf(j.in, "- %d\n", id)
}

// close ends the janitor, which then undoes whatever it still holds.
func (j *janitor) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.in.Close()
	return j.cmd.Wait()
}
