package fileio

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/appender"
)

var (
	// ErrClosed reports use of a closed Writer, Reader or Sequential. It
	// matches fs.ErrClosed too, as os.File's errors do.
	ErrClosed = fmt.Errorf("fileio: %w", fs.ErrClosed)
	// ErrInvalidOptions reports Options that Create, OpenAppend or Open
	// refuse, before any file is created or changed.
	ErrInvalidOptions = errors.New("fileio: invalid options")
	// ErrOffset reports an offset no read can start at: a negative one.
	ErrOffset = errors.New("fileio: offset outside the file")
)

// Options configure a Writer or a Reader. A nil *Options means defaults.
type Options struct {
	// BufferSize is the size of a Writer's buffers, rounded up to the
	// file's alignment; default 64 KiB, at most MaxBufferSize.
	BufferSize int
	// Buffers is how many buffers a Writer owns: by default, with
	// O_DIRECT, two merged 512 KiB writes (16 of 64 KiB), one filling
	// while the other is in flight; 4 through the page cache or a Pool.
	// At most MaxBuffers; Create refuses Buffers × BufferSize bytes the
	// system will not map (ENOMEM) with ErrInvalidOptions.
	Buffers int
	// IO chooses the I/O path (see package fallback); default Auto:
	// O_DIRECT where the filesystem takes it, else the page cache.
	IO fallback.Policy
	// Pool, when set, supplies a Writer's buffers, so that many writers
	// share one memory budget, and a Reader's read buffers, taken for
	// each read and given back when it returns: open Readers hold none
	// between reads. Its buffer size overrides BufferSize, and its
	// buffers must fit the file's alignment (else ErrInvalidOptions).
	Pool *aligned.Pool
	// Size, for Open only, makes the Reader read the file as if it were
	// Size bytes long: the logical size a service recorded (from
	// Writer.Synced) before a crash left an unspecified tail past it.
	// 0 means the file's size. Create refuses a non-zero Size with
	// ErrInvalidOptions (a new file's size is what is written to it, and
	// no preallocation or limit is implied); OpenAppend ignores it, as its
	// size argument says where writing resumes.
	Size int64

	// ReadAhead, for Open only, is how far a Sequential reads ahead of
	// its caller; default DefaultReadAhead, at most MaxReadAhead.
	ReadAhead int

	// NoSync makes a Writer's Close skip the fdatasync, for a caller that
	// makes many files durable at once, or never needs them to be. Sync
	// still syncs.
	NoSync bool

	// NoDirSync makes Create skip its fsync of the new file's directory,
	// for a caller that syncs the directory itself once the file matters,
	// as Pebble does (after a flush or compaction has written its
	// sstables, after creating a WAL, when it moves the MANIFEST's
	// marker): the fsync is then one per batch of files, not one per
	// file. Until the directory is synced a power cut may lose the file's
	// name, whatever the file's own Sync made durable.
	NoDirSync bool

	// Context, for Create and OpenAppend, bounds their wait for the
	// writer's first buffer when a Pool's budget is spent: they then fail
	// with the context's error and leave no new file. nil:
	// context.Background().
	Context context.Context

	// Faults injects I/O errors into the file's system calls, for tests
	// (see package faults): a Writer's and a Reader's alike.
	Faults direct.Injector

	// Retry, when set, makes a Writer retry a write or fdatasync that
	// failed with ENOSPC, EDQUOT or EIO, with backoff, until the
	// policy's Context ends, telling OnRetry of each failure instead of
	// returning it. nil: the failure is returned, and the Writer keeps
	// every byte it acknowledged for a later Sync to write again.
	Retry *RetryPolicy

	// Slow, when set, reports a Writer's or Reader's read, write,
	// fdatasync or truncate still in flight past Slow.Threshold, once
	// per operation, on a goroutine of its own, never delaying the I/O
	// (as Pebble's vfs.WithDiskHealthChecks does). nil costs nothing.
	Slow *SlowPolicy
}

// SlowPolicy is Options.Slow: Report is called once for an I/O still in
// flight past Threshold (see direct.SlowPolicy).
type SlowPolicy = direct.SlowPolicy

// SlowIO is what SlowPolicy.Report is told: the file, operation, offset,
// length and time in flight so far.
type SlowIO = direct.SlowIO

// MaxBufferSize, 256 MiB, is the largest Options.BufferSize (and Pool
// buffer size) Create, OpenAppend and Open take; a larger one gives
// ErrInvalidOptions before any file is created. One buffer is one write,
// which must fit an io_uring SQE's 32-bit length and Linux's MAX_RW_COUNT
// (2 GiB less a page); 256 MiB is far below both, 4096 times the default
// and the blob format's own limit, and a larger buffer buys no throughput.
const MaxBufferSize = appender.MaxBufferSize

// MaxBuffers, 32768, is the largest Options.Buffers: IORING_MAX_ENTRIES,
// as a ring holds no more writes in flight than its queue has entries.
const MaxBuffers = appender.MaxBuffers

// RetryPolicy is Options.Retry: retry failures that can pass (ENOSPC,
// EDQUOT, EIO) with backoff until Context ends, telling OnRetry of each.
type RetryPolicy = appender.RetryPolicy

// DefaultReadAhead is how far a Sequential reads ahead by default:
// RocksDB's compaction_readahead_size, 2 MiB, in reads of up to
// maxSeqRead.
const DefaultReadAhead = 2 << 20

// MaxReadAhead, 256 MiB, is the largest Options.ReadAhead Open takes: a
// Sequential holds its read-ahead in aligned buffers whatever the file's
// size, and 1 TiB of it failed every read with ENOMEM.
const MaxReadAhead = 256 << 20

// get returns *o, or the zero Options for nil.
func (o *Options) get() Options {
	if o == nil {
		return Options{}
	}
	return *o
}

// validate refuses Options before any file is created or opened.
func (o Options) validate() error {
	switch {
	case o.Size < 0:
		return fmt.Errorf("%w: Size is %d", ErrInvalidOptions, o.Size)
	case o.ReadAhead < 0 || o.ReadAhead > MaxReadAhead:
		return fmt.Errorf("%w: ReadAhead is %d, at most %d", ErrInvalidOptions, o.ReadAhead, MaxReadAhead)
	}
	return appender.WrapInvalid(o.appender().Validate(), ErrInvalidOptions)
}

// appender returns the appender's Options o makes.
func (o Options) appender() appender.Options {
	return appender.Options{BufferSize: o.BufferSize, Buffers: o.Buffers, Pool: o.Pool, NoSync: o.NoSync, Context: o.Context, Retry: o.Retry,
		IO: o.IO, Faults: o.Faults, NoDirSync: o.NoDirSync, Slow: o.Slow}
}
