package appender

import (
	"os"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
)

// File is what an Appender asks of the file it appends to: the narrow
// seam that fallback.File satisfies and a test double can fake without a
// disk. Data moves only through the queue NewQueue returns; the other
// methods shape the file around it and make it durable.
type File interface {
	// Alignment is the offset and memory alignment of every write.
	Alignment() direct.Alignment
	// Mode says whether writes are direct (merged writes, growing ahead).
	Mode() fallback.Mode
	// NewQueue returns the queue every write goes through.
	NewQueue(o *direct.QueueOptions) (direct.Queue, error)
	// Allocate grows the file ahead of the writes (see growTo); an error
	// matching errors.ErrUnsupported makes the Appender Truncate instead.
	Allocate(off, n int64) error
	// Truncate cuts the file to the logical size (trimTo) or grows it.
	Truncate(size int64) error
	// Sync fdatasyncs, in the caller's thread: for Sync, Close and
	// SyncData once their writes are complete, and for a cut after a
	// failed Close.
	Sync() error
	// Close closes the file at the end of Close and Discard.
	Close() error
	// Name tells which filesystem the file is on (copyOnWrite).
	Name() string
	// Stat and ReadAt serve Resume: the file's size, and the unaligned
	// last block read back.
	Stat() (os.FileInfo, error)
	ReadAt(p []byte, off int64) (int, error)
}

// fallback.File is the File of every caller.
var _ File = fallback.File(nil)
