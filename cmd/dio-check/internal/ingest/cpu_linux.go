//go:build linux

package ingest

import (
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
