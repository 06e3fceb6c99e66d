//go:build unix

package blobio_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used, user and system,
// every thread (io_uring's io-wq workers included), or 0 if unknown.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
