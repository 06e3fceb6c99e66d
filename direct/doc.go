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
// instead: Buffered gives the same File over it, with no alignment rules.
// WithFaults and WithWriteFlags return a File over the same descriptor
// whose I/O, and every queue made from it, meets an Injector (package
// faults) or carries RWF_* flags.
//
// A Queue issues writes, reads and fdatasync asynchronously, so that a
// writer fills one buffer while the device writes another and many readers
// keep the device's queue full. Its engines are io_uring on Linux and a
// pread/pwrite engine on worker goroutines wherever io_uring is missing.
//
// The io_uring engine runs every queue of the process on a few shared
// rings (at most min(GOMAXPROCS, 4), set up lazily; the first by the probe
// behind URingError, which runs once per process), so opening a file or a
// queue sets up no ring. There is no reaper goroutine: whoever waits (in
// Await, in Submit for room, in Close) reaps for everyone, one at a time:
// blocked in io_uring_enter while few goroutines wait, parked in Go's
// poller on the ring's descriptor while more wait than Ps run (a thread
// blocked in the kernel holds a P the goroutines it wakes need).
// Submitters enter the kernel side by side, not one after another, and
// SubmitBatch gets many requests in with one io_uring_enter.
// Each queue counts its own requests under the ring's lock and Close waits
// for those only, so Close returns whatever races it; every accepted
// request gets exactly one Completion with its Token, also when its ring
// breaks. File descriptors are used only inside os.File's reference
// (RawConn.Control), so a File closed while I/O races it fails that I/O
// with fs.ErrClosed and never reaches a file that reuses the number.
package direct
