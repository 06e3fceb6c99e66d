package main

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// childAttrs makes the measuring process die with dio-check, whatever
// kills dio-check (a child left running would keep the cgroup busy), and
// puts it in its own process group, so that a Ctrl-C reaches dio-check
// alone, which kills the child and then removes the cgroup.
func childAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// cotenantAttrs makes the co-tenant process die with the measuring
// process; it stays in its process group, which a signal's cleanup kills
// as a whole.
func cotenantAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// readCPUTimes reads the CPUs' times so far from /proc/stat.
func readCPUTimes() (cpuTimes, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	return parseCPUTimes(stat)
}

// availBytes returns the bytes free to an unprivileged user on dir's
// filesystem.
func availBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
