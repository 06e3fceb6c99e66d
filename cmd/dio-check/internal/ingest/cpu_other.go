//go:build !linux

package ingest

import "time"

// ProcessCPU is Linux's: elsewhere the CPU columns stay empty.
func ProcessCPU() (time.Duration, bool) { return 0, false }
