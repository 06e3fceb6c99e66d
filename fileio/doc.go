// Package fileio writes and reads plain files of bytes with O_DIRECT
// where the filesystem allows it, for services whose file format is their
// own: an LSM's sstables and write-ahead log, a page file. The caller
// writes and reads any number of bytes at any offset; the package keeps
// every transfer aligned, out of the page cache, and pipelined.
//
// Use fileio for a format of your own, and package blobio for files of
// blobs in Neon's format (a length header before each record, optional
// zstd). The two are faces of the same writer and reader cores (package
// internal/appender and internal/reader), neither built on the other.
//
// # Writing
//
// Create returns a Writer, an io.Writer that copies writes of any size
// into aligned buffers and writes whole buffers, merged into large writes,
// while the caller fills the next (RocksDB's WritableFileWriter does the
// same). Sync writes the unaligned tail padded to the alignment, which
// the next flush rewrites, and fdatasyncs; Synced is the size it made
// durable. Close writes the tail, truncates the file to Size, fdatasyncs
// (the truncate included) and closes: the file then ends at its last
// byte. Create fsyncs the directory, unless Options.NoDirSync leaves that
// to the caller. OpenAppend goes on writing a file from a size made
// durable before.
//
// # Reading
//
// Open returns a Reader, an io.ReaderAt at any offset and length, safe
// for any number of goroutines: each read rounds its range out to the
// alignment and reads it into a pooled aligned buffer, on the process's
// shared io_uring rings when others are in flight (RocksDB's
// RandomAccessFileReader). A sequential reader (a compaction, a scan, a
// log replay) takes a Sequential from NewSequential: an io.Reader,
// io.Seeker, io.WriterTo and io.ReaderAt that reads ahead, windows that
// grow to 512 KiB with up to Options.ReadAhead (2 MiB, RocksDB's
// compaction_readahead_size) in flight while the caller consumes.
// Random readers never pay for it. A caller with an aligned.Buffer of
// its own reads an aligned range straight into it with ReadAtBuffer, no
// pooled buffer and no copy (a read ahead of its own, as pebblefs's
// Prefetch).
//
// # Crashes
//
// Writer.Synced is the logical size made durable by the last successful
// Sync or Close. After a crash (the process killed, the power cut) the
// file holds those bytes intact, then an unspecified tail: bytes written
// after the last Sync, and zeros, because with O_DIRECT the Writer grows
// the file ahead of its writes (a write that extends a file is serialised
// by ext4 and xfs) and only Close cuts it back. A service records Synced
// and opens the file with Options.Size set to it, which reads the file as
// if it were that long, or goes on writing with OpenAppend(path, synced,
// o).
//
// # The API
//
//	Create(path, *Options) (*Writer, error)
//	OpenAppend(path, size, *Options) (*Writer, error)
//	(*Writer) Write, Sync, Synced, Size, Mode, Fd, Stats, Close
//	Open(path, *Options) (*Reader, error)
//	(*Reader) ReadAt, ReadAtBuffer, Size, Mode, Fd, NewSequential, Stats, Close
//	(*Sequential) Read, Seek, ReadAt, WriteTo, Close
//	Options{BufferSize, Buffers, IO, Pool, Size, ReadAhead, NoSync, NoDirSync, Context, Faults, Retry, Slow}
//	RetryPolicy{Context, OnRetry, MinDelay, MaxDelay}
//	SlowPolicy, SlowIO (direct's), ReaderStats, WriterStats
//	ErrClosed (matches fs.ErrClosed), ErrInvalidOptions, ErrOffset
//	MaxBufferSize (256 MiB), MaxBuffers (32768), DefaultReadAhead, MaxReadAhead (256 MiB)
//
// Errors: bad Options (a buffer over MaxBufferSize, a ring the system will
// not map, a Size given to Create) match ErrInvalidOptions and leave no
// file; a closed
// Writer, Reader or Sequential returns errors matching fs.ErrClosed; a
// write or Sync failing with ENOSPC, EDQUOT or EIO keeps every byte Write
// acknowledged, and the next Write, Sync or Close writes them again, so
// that once the cause is gone the Writer goes on (Options.Retry retries
// internally instead; see package blobio, "Failures", for what is and is
// not promised); other I/O errors stop it for good, and what Synced
// covered stays in the file. A read over an unreadable sector returns the
// bytes before it and a *direct.SectorError naming it. Filesystems that refuse O_DIRECT
// (ramfs, some overlays) get the page cache through package fallback, and
// Mode says so and why.
package fileio
