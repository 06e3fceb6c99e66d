// Package direct opens files with O_DIRECT and moves data between them and
// aligned memory without the kernel page cache.
//
// Direct I/O has rules the page cache hides: the buffer's address, the file
// offset and the length must be multiples of the alignment the filesystem
// and device demand. File discovers that alignment per file (statx
// STATX_DIOALIGN, then the block device's logical block size, then 4096),
// checks every ReadAt and WriteAt against it before the kernel sees it, and
// reports a violation as ErrUnaligned with the three values, not as a bare
// EINVAL. A filesystem that refuses O_DIRECT altogether yields
// ErrNotSupported, so a caller (package fallback) can choose the page cache
// instead.
//
// A Queue issues writes, reads and fdatasync asynchronously, so that a
// writer fills one buffer while the device writes another. Its engines are
// io_uring on Linux and a pread/pwrite engine on worker goroutines wherever
// io_uring is missing.
package direct
