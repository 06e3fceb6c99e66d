package pebblefs

import (
	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
)

// Options configures an FS. The zero value (or a nil *Options) is
// fileio's defaults: O_DIRECT where the filesystem takes it, std-fs where
// it does not.
type Options struct {
	// IO is the I/O policy of every file: fallback.Auto (the default)
	// tries O_DIRECT and degrades to std-fs on filesystems that refuse it,
	// fallback.Direct never degrades, fallback.StdFS uses the page cache.
	IO fallback.Policy
	// BufferSize and Buffers size each writer's aligned buffers, as in
	// fileio.Options (zero: fileio's defaults).
	BufferSize int
	Buffers    int
	// Pool, if set, is one budget of aligned buffers that every file's
	// writes draw from.
	Pool *aligned.Pool
	// ReadAhead is how far a file opened with vfs.SequentialReadsOption
	// (a compaction's input, a checkpoint's copy) reads ahead of Pebble;
	// zero: fileio.DefaultReadAhead, 2 MiB.
	ReadAhead int
	// Faults, for tests, injects I/O errors into every file's reads,
	// writes and fdatasyncs (see package faults), as Pebble's errorfs
	// does above the vfs.FS.
	Faults direct.Injector
}
