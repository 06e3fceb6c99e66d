//go:build race

package testenv

// Race reports whether the race detector is on. Under it sync.Pool drops
// a quarter of what it is given, so allocation counts mean nothing; the
// Makefile runs the Allocs tests again without it.
const Race = true
