package main

import (
	"os"
	"os/exec"
	"syscall"
	"unsafe"

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

// residency reports which part of a file sits in the page cache, through a
// mapping that faults nothing in (mincore).
type residency struct {
	m   []byte
	vec []byte
}

func newResidency(f *os.File, size int64) (*residency, error) {
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	page := int64(os.Getpagesize())
	return &residency{m: m, vec: make([]byte, (size+page-1)/page)}, nil
}

// fraction returns the fraction of the file's pages resident now.
func (r *residency) fraction() (float64, error) {
	// x/sys has no Mincore wrapper on Linux.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&r.m[0])), uintptr(len(r.m)), uintptr(unsafe.Pointer(&r.vec[0])))
	if errno != 0 {
		return 0, os.NewSyscallError("mincore", errno)
	}
	n := 0
	for _, v := range r.vec {
		n += int(v & 1)
	}
	return float64(n) / float64(len(r.vec)), nil
}

func (r *residency) close() { unix.Munmap(r.m) }
