//go:build linux

package benchkit

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ProcessCPU returns the CPU time, user and system, the whole process has
// used so far: every thread, io_uring's io-wq workers included (they
// count as the process's threads), which is what an I/O costs the
// machine. Go's profiler sees less. ok is false where it cannot be read.
func ProcessCPU() (d time.Duration, ok bool) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// ChildCPU returns the CPU time a finished child used, counted as
// ProcessCPU counts ours (wait4's rusage of the child, its threads and
// io-wq workers included): fio's own usr/sys figures leave its io-wq
// workers out.
func ChildCPU(p *os.ProcessState) time.Duration {
	ru, ok := p.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
