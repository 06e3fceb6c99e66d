package testenv

import (
	"fmt"

	"github.com/dio-storage/dio/fallback"
)

// Engine is an I/O path a benchmark compares: its name, as dio-check and
// the benchmark sub-tests use it, and the policy that opens its files.
type Engine struct {
	Name   string
	Policy fallback.Policy
}

// Engines returns the I/O paths benchmarks compare, in a new slice.
func Engines() []Engine {
	return []Engine{
		{"std-fs", fallback.StdFS},
		{"direct+pwrite", fallback.DirectPwrite},
		{"direct+io_uring", fallback.Direct},
	}
}

// SizeName formats a byte count as benchmarks and tests name it, exactly:
// 100B, 8KiB, 1MiB, and 64000B rather than a rounded 62.5KiB. It is the
// tests' one size formatter; dio-check's output has its own (sizeName in
// cmd/dio-check, which rounds to a tenth), since a production package
// does not import test support.
func SizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
