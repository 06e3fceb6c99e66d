package fileio

import "github.com/dio-storage/dio/direct"

// ReaderStats counts a Reader's reads since Open (direct.ReaderStats,
// shared with blobio and ephemeral): Reads and Bytes are its ReadAt
// calls that asked for bytes and the bytes they asked for, DeviceBytes
// what the device read, whole aligned blocks. A Sequential's Read,
// ReadAt and WriteTo calls are reads too (WriteTo one asking for the
// rest of the file), its read-ahead in DeviceBytes.
type ReaderStats = direct.ReaderStats

// Stats returns the Reader's counts. The process's, by path, are
// direct.Stats.
func (r *Reader) Stats() ReaderStats { return r.c.Stats().Reader() }

// WriterStats counts a Writer's work since Create or OpenAppend
// (direct.WriterStats, shared with blobio and ephemeral): its Write
// calls and their bytes against the bytes the device wrote, padded
// tails and rewrites included; its fdatasyncs and their latencies; the
// writes and fdatasyncs it made again.
type WriterStats = direct.WriterStats

// Stats returns the Writer's counts; they stay readable after Close.
func (w *Writer) Stats() WriterStats { return w.ap.Stats().Writer() }
