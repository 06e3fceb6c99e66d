// Package dio is a Go library for storage services that keep their data
// out of the kernel's page cache: files written and read with O_DIRECT
// through aligned buffers, on io_uring (pure Go, no cgo) or a pwrite
// engine, falling back to the page cache on filesystems that refuse
// O_DIRECT. This package holds no code; it says which package to import.
//
// # Where to start
//
// A service with a file format of its own (an LSM's tables and
// write-ahead log, a page file) writes and reads plain bytes with package
// fileio; one that stores records writes blobs with package blobio, in the
// format of Neon's pageserver, optionally compressed and checksummed.
// Both pick the I/O path for the file they open and say which
// (Mode), and both are safe to read from many goroutines. Each package
// has a runnable Example, the shortest correct program that uses it.
//
// # The packages, top to bottom
//
//   - [github.com/dio-storage/dio/blobio]: files of blobs (Writer, Log for
//     group commit, Reader with ReadBlob and vectored ReadBlobs, Scanner),
//     crash recovery by recorded size, opt-in CRC32C per blob.
//     Examples: https://pkg.go.dev/github.com/dio-storage/dio/blobio#pkg-examples
//   - [github.com/dio-storage/dio/fileio]: plain files of bytes: a Writer
//     taking writes of any size, a Reader with ReadAt at any offset.
//     Examples: https://pkg.go.dev/github.com/dio-storage/dio/fileio#pkg-examples
//   - [github.com/dio-storage/dio/ephemeral]: a temporary append-only file,
//     readable while it is written, gone when closed.
//     Examples: https://pkg.go.dev/github.com/dio-storage/dio/ephemeral#pkg-examples
//   - [github.com/dio-storage/dio/fallback]: Open with a Policy (Auto,
//     Direct, StdFS) and the Mode it chose, with the reason.
//     Examples: https://pkg.go.dev/github.com/dio-storage/dio/fallback#pkg-examples
//   - [github.com/dio-storage/dio/faults]: fault injection (errno, short
//     transfers, delays) for testing a service's error paths.
//     Examples: https://pkg.go.dev/github.com/dio-storage/dio/faults#pkg-examples
//   - [github.com/dio-storage/dio/direct]: the O_DIRECT file underneath:
//     alignment discovery, aligned ReadAt and WriteAt, the asynchronous
//     Queue (io_uring and pwrite engines, SubmitBatch), untorn writes
//     (File.WriteAtomicAt) and latent sector errors (SectorError), for
//     callers that align their own buffers.
//     Examples: https://pkg.go.dev/github.com/dio-storage/dio/direct#pkg-examples
//   - [github.com/dio-storage/dio/aligned]: aligned memory outside the Go
//     heap and a Pool with a byte budget shared by writers.
//     Examples: https://pkg.go.dev/github.com/dio-storage/dio/aligned#pkg-examples
//
// Two more live beside the library: the command
// github.com/dio-storage/dio/cmd/dio-check, which probes a directory for
// direct I/O and measures it against the page cache, and the nested module
// github.com/dio-storage/dio/pebblefs, a vfs.FS that runs CockroachDB's
// Pebble on dio (a module of its own, so that dio never pulls Pebble in).
//
// # Platforms
//
// Linux gets everything: io_uring, statx's direct-I/O alignment (6.1),
// untorn writes with RWF_ATOMIC (6.11), uncached buffered writes with
// RWF_DONTCACHE on the fallback (6.14). darwin, windows and freebsd build
// and run the same API through github.com/ncw/directio (F_NOCACHE,
// FILE_FLAG_NO_BUFFERING) on the pwrite engine.
package dio
