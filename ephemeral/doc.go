// Package ephemeral provides a temporary, append-only file for data that
// lives only as long as the process needs it, such as a database's
// in-memory layer spilled to disk: the counterpart of Neon's EphemeralFile.
//
// The file has no name (O_TMPFILE where the filesystem allows it, else a
// random name unlinked at once), so it is gone when it is closed or when
// the process dies. Appends fill the aligned buffers of the writer core
// (internal/appender), written with O_DIRECT while the next ones fill;
// reads are served from those buffers while they hold the bytes, and from
// the disk through the reader core (internal/reader: pooled aligned
// reads, a read-ahead window for a reader that goes on in order, an EIO
// split into sectors) otherwise, so readers see every appended byte at
// once, concurrently with the writer. As in Neon's EphemeralFile, a read takes its bytes from three
// places at once (the written part on disk, the buffers in flight, the
// buffer filling), and the lock that says which is which is never held
// across a device wait: the writer never waits for a reader's device read,
// nor a reader for the writer's device write. See File for what is safe
// concurrently and the memory a File holds.
//
// A write failing with ENOSPC, EDQUOT or EIO costs no appended byte: the
// buffers that failed stay in memory, readers still read from them, and
// the next Write or WriteBlob writes them again, so that a File goes on
// once space is freed (Options.Retry retries internally instead; see
// package blobio, "Failures").
package ephemeral
