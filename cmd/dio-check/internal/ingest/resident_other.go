//go:build !linux

package ingest

// resident is measured on Linux only; elsewhere it reports -1 bytes.
func resident(_ uintptr, size int64) (int64, int64, error) { return -1, size, nil }

// Settle is a no-op where syncfs is not available.
func Settle(string) error { return nil }

// DropCache does nothing where posix_fadvise is not available: reads of a
// cached file there measure memory.
func DropCache(string) error { return nil }
