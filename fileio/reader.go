package fileio

import (
	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/reader"
)

// ReadDepth is the depth of a Reader's queue: the most reads of its
// callers in the ring at once. fio's 4 KiB random reads on the virtio
// disk measured here still gained from QD16 to QD64 (63,192 to 109,594
// reads/s, issue 13).
const ReadDepth = reader.Depth

// A Reader reads a file at any offset and length. It is safe for
// concurrent use and holds no lock across a device read: each read rounds
// its range out to the file's alignment, reads that into an aligned
// buffer from a bounded pool and copies the asked bytes out (RocksDB's
// RandomAccessFileReader does the same). A read runs as a plain pread in
// its caller's thread while no other is in progress, and on an io_uring
// file, while others are, in the Reader's queue on the process's shared
// rings, where they are in flight together without a thread each.
//
// Memory: a read whose aligned span fits 16 KiB takes one of at most 128
// small buffers (2 MiB), a larger one one of at most 32 buffers of 128
// KiB plus a block (4.1 MiB with 4 KiB blocks), allocated as reads need
// them and freed by Close; a read that finds every buffer in use gets one
// for itself, freed when it returns, rather than wait. With
// Options.Pool, reads take the Pool's buffers instead and give them back
// as they return, so that a thousand open Readers hold no memory between
// reads (an idle Reader holds at least a small and a large buffer of its
// own otherwise, 148 KiB).
//
// A sequential reader (a compaction, a scan, a log replay) takes a
// Sequential (NewSequential), which reads ahead; random readers never pay
// for it.
type Reader struct {
	c         *reader.Reader // the reader core (internal/reader), which blobio's Reader is made of too
	readAhead int
}

// Open opens the file at path for reading.
//
// With o.Size > 0 the Reader reads the file as if it were o.Size bytes
// long, the logical size a service recorded from Writer.Synced: Size
// reports it, and reads end there with io.EOF. A Size beyond the file's
// end means bytes the service counted on are gone: Open fails with an
// error matching both ErrInvalidOptions and io.ErrUnexpectedEOF. Options
// it refuses give an error matching ErrInvalidOptions.
func Open(path string, o *Options) (*Reader, error) {
	opts := o.get()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	ro := reader.Options{Name: "fileio", IO: opts.IO, Faults: opts.Faults, Size: opts.Size, Slow: opts.Slow,
		Closed: ErrClosed, Invalid: ErrInvalidOptions, Offset: ErrOffset}
	if opts.Pool != nil {
		// One budget for many Readers: none holds a buffer between reads.
		ro.Small = reader.NewShared(opts.Pool)
		ro.Large = ro.Small
	}
	c, err := reader.Open(path, ro)
	if err != nil {
		return nil, err
	}
	ra := opts.ReadAhead
	if ra == 0 {
		ra = DefaultReadAhead
	}
	return &Reader{c: c, readAhead: aligned.Up(ra, int(c.Block()))}, nil
}

// Size returns the size the Reader reads up to: Options.Size, or the size
// of the file when it was opened.
func (r *Reader) Size() int64 { return r.c.Size() }

// Mode reports the I/O path the Reader uses.
func (r *Reader) Mode() fallback.Mode { return r.c.File().Mode() }

// Fd returns the file's descriptor, for advice to the kernel
// (posix_fadvise, fstat) and nothing else. It is valid until Close, and
// another file may get the number after it.
func (r *Reader) Fd() uintptr { return r.c.File().Fd() }

// ReadAt reads len(p) bytes at off, as io.ReaderAt and os.File do: a
// read that Size cuts short returns the bytes there are and io.EOF (one
// that ends exactly at Size, nil), an empty p 0 and nil wherever off
// lies, a negative off an error matching ErrOffset. Any offset and
// length: the range is read rounded out to the file's alignment, in
// reads of up to 128 KiB, several in flight at once for a long p. It is
// safe for concurrent use.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) { return r.c.ReadAt(p, off) }

// ReadAtBuffer reads the first n bytes of b at off, as ReadAt does, and
// when off and n are multiples of the file's alignment (4096 always is,
// on every filesystem dio knows) and b's alignment is the file's memory
// alignment or more, straight into b: one device read and no copy
// through a pooled buffer, which a read ahead of 64 KiB and more pays for
// in CPU (the pool's buffer comes back from the device out of the CPU's
// caches). Otherwise it reads as ReadAt. Past the end of the file (or
// Options.Size) the bytes of b up to n's alignment are unspecified. b must
// not be used by anything else until it returns; an n outside 0 to
// b.Size() panics, as slicing past a slice's capacity does.
func (r *Reader) ReadAtBuffer(b *aligned.Buffer, n int, off int64) (int, error) {
	return r.c.ReadInto(b.Bytes()[:n], off)
}

// Close waits for the reads in progress, closes the Reader's Sequentials
// and its file, and makes later calls fail with ErrClosed.
func (r *Reader) Close() error { return r.c.Close() }
