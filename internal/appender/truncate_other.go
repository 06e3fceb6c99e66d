//go:build !linux

package appender

var pageSize int64 = 4096

// dropCache does nothing where the truncate it follows caches nothing
// that dio has measured.
func dropCache(fd uintptr, off, n int64) {}
