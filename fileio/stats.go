package fileio

import "github.com/dio-storage/dio/direct"

// ReaderStats counts a Reader's reads since Open: what its callers asked
// for against what the device read, whose ratio is the read
// amplification of alignment (a 100-byte read costs a whole aligned
// block, or two when it straddles one). A Sequential's read-ahead is in
// DeviceBytes, its callers' reads are not in Reads and Bytes.
type ReaderStats struct {
	Reads       uint64 // ReadAt calls that asked for bytes
	Bytes       uint64 // the bytes they asked for
	DeviceBytes uint64 // the bytes the device read for the Reader: whole aligned blocks, sector splits included
}

// Sub returns s minus prev, an earlier snapshot of the same Reader.
func (s ReaderStats) Sub(prev ReaderStats) ReaderStats {
	return ReaderStats{s.Reads - prev.Reads, s.Bytes - prev.Bytes, s.DeviceBytes - prev.DeviceBytes}
}

// Stats returns the Reader's counts. The process's, by path, are
// direct.Stats.
func (r *Reader) Stats() ReaderStats {
	s := r.c.Stats()
	return ReaderStats{Reads: s.Read.Calls, Bytes: s.Read.Asked, DeviceBytes: s.Read.Bytes}
}

// WriterStats counts a Writer's work since Create or OpenAppend: the
// bytes written to it against the bytes the device wrote (padded tails
// written, and written again by the next flush; writes made again
// after a failure), the write amplification; and its fdatasyncs with
// their latencies.
type WriterStats struct {
	Writes      uint64           // Write calls
	Bytes       uint64           // the bytes given to Write
	DeviceBytes uint64           // the bytes the device wrote: whole aligned blocks, tails and retries included
	Syncs       uint64           // fdatasyncs: Sync's, Close's
	SyncLatency direct.Histogram // their latencies
	Retries     uint64           // writes and fdatasyncs made again after ENOSPC, EDQUOT or EIO
}

// Sub returns s minus prev, an earlier snapshot of the same Writer.
func (s WriterStats) Sub(prev WriterStats) WriterStats {
	return WriterStats{
		Writes:      s.Writes - prev.Writes,
		Bytes:       s.Bytes - prev.Bytes,
		DeviceBytes: s.DeviceBytes - prev.DeviceBytes,
		Syncs:       s.Syncs - prev.Syncs,
		SyncLatency: s.SyncLatency.Sub(prev.SyncLatency),
		Retries:     s.Retries - prev.Retries,
	}
}

// Stats returns the Writer's counts; they stay readable after Close.
func (w *Writer) Stats() WriterStats {
	s := w.ap.Stats()
	return WriterStats{Writes: s.Write.Calls, Bytes: s.Write.Asked, DeviceBytes: s.Write.Bytes,
		Syncs: s.Sync.Ops, SyncLatency: s.SyncLatency, Retries: s.WriterRetries}
}
