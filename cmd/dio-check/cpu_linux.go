//go:build linux

package main

import (
	"os"
	"syscall"
	"time"
)

// childCPU returns the CPU time a finished child used, counted as
// ingest.ProcessCPU counts ours (wait4's rusage of the child, its threads and
// io-wq workers included): fio's own usr/sys figures leave its io-wq
// workers out.
func childCPU(p *os.ProcessState) time.Duration {
	ru, ok := p.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
