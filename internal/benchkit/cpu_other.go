//go:build !linux

package benchkit

import (
	"os"
	"time"
)

// ProcessCPU is Linux's: elsewhere the CPU columns stay empty.
func ProcessCPU() (time.Duration, bool) { return 0, false }

// ChildCPU is Linux's: elsewhere the CPU columns stay empty.
func ChildCPU(*os.ProcessState) time.Duration { return 0 }
