package testenv

import (
	"fmt"

	"github.com/dio-storage/dio/fallback"
)

// Engines are the I/O paths benchmarks compare, by the names dio-check and
// the benchmark sub-tests use.
var Engines = []struct {
	Name   string
	Policy fallback.Policy
}{
	{"std-fs", fallback.StdFS},
	{"direct+pwrite", fallback.DirectPwrite},
	{"direct+io_uring", fallback.Direct},
}

// SizeName formats a byte count as benchmarks name it: 100B, 8KiB, 1MiB.
func SizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
