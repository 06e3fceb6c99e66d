package direct

// ReaderStats counts a reader's reads: what its callers asked for
// against what the device read, whose ratio is the read amplification
// of alignment (a 100-byte read costs a whole aligned block, or two
// when it straddles one). fileio's, blobio's and ephemeral's readers
// report it (their Stats), each saying what a read is. The reads a
// read-ahead serves (fileio's Sequential, blobio's Scanner) are counted
// as their callers asked for them, so DeviceBytes over Bytes shows what
// the read-ahead read and nobody took.
type ReaderStats struct {
	Reads       uint64 // reads asked for: calls that asked for bytes (ReadAt, a Sequential's Read), blobs (ReadBlob, each of ReadBlobs, a Scanner's)
	Bytes       uint64 // the bytes they asked for (a blob's: its header and stored bytes)
	DeviceBytes uint64 // the bytes the device read for the reader: whole aligned blocks, sector splits included
}

// Sub returns s minus prev, an earlier snapshot of the same reader.
func (s ReaderStats) Sub(prev ReaderStats) ReaderStats {
	return ReaderStats{s.Reads - prev.Reads, s.Bytes - prev.Bytes, s.DeviceBytes - prev.DeviceBytes}
}

// Add returns s plus t, another reader's: a service's total over its
// files.
func (s ReaderStats) Add(t ReaderStats) ReaderStats {
	return ReaderStats{s.Reads + t.Reads, s.Bytes + t.Bytes, s.DeviceBytes + t.DeviceBytes}
}

// Reader returns the ReaderStats of a reader whose Meter counted s: its
// owner's Asked calls and bytes for reads, and its files' read bytes.
func (s MeterStats) Reader() ReaderStats {
	return ReaderStats{Reads: s.Read.Calls, Bytes: s.Read.Asked, DeviceBytes: s.Read.Bytes}
}

// WriterStats counts a writer's work: the bytes written to it against
// the bytes the device wrote (padded tails written, and written again by
// the next flush; writes made again after a failure), the write
// amplification; and its fdatasyncs with their latencies. fileio's,
// blobio's and ephemeral's writers report it (their Stats).
type WriterStats struct {
	Writes      uint64    // Write calls; WriteBlob calls (a blob's header and stored bytes in Bytes)
	Bytes       uint64    // the bytes given to them
	DeviceBytes uint64    // the bytes the device wrote: whole aligned blocks, tails and retries included
	Syncs       uint64    // fdatasyncs: Sync's, Close's
	SyncLatency Histogram // their latencies
	Retries     uint64    // writes and fdatasyncs made again after ENOSPC, EDQUOT or EIO
}

// Sub returns s minus prev, an earlier snapshot of the same writer.
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

// Add returns s plus t, another writer's: a service's total over its
// files, the latencies merged.
func (s WriterStats) Add(t WriterStats) WriterStats {
	s.SyncLatency.add(&t.SyncLatency)
	return WriterStats{
		Writes:      s.Writes + t.Writes,
		Bytes:       s.Bytes + t.Bytes,
		DeviceBytes: s.DeviceBytes + t.DeviceBytes,
		Syncs:       s.Syncs + t.Syncs,
		SyncLatency: s.SyncLatency,
		Retries:     s.Retries + t.Retries,
	}
}

// Writer returns the WriterStats of a writer whose Meter counted s: its
// owner's Asked calls and bytes for writes, its files' written bytes,
// fdatasyncs (with MeterOptions.SyncLatency, their latencies) and
// WriterRetried calls.
func (s MeterStats) Writer() WriterStats {
	return WriterStats{Writes: s.Write.Calls, Bytes: s.Write.Asked, DeviceBytes: s.Write.Bytes,
		Syncs: s.Sync.Ops, SyncLatency: s.SyncLatency, Retries: s.WriterRetries}
}
