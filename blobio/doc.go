// Package blobio writes and reads files of variable-sized blobs in the
// format of Neon's pageserver (blob_io.rs), through aligned buffers and
// O_DIRECT where the filesystem allows it.
//
// Each blob is a header and its bytes. An uncompressed blob of 1 to 127
// bytes has a 1-byte header holding its length (high bit clear). Any other
// blob, the empty one included, has a 4-byte big-endian header: bit 31
// set, bits 28-30 the compression (0x8_ in the first byte for none, 0x9_
// for zstd), bits 0-27 the stored length. A blob is addressed by the
// offset of its header. (Neon writes an empty blob with the 1-byte header
// 0x00 and reads either; dio never writes a 0x00 header, see below.)
//
// blobio and package fileio, which writes and reads plain files of bytes
// (use it for a format of your own), are two faces of the same writer
// and reader cores (internal/appender, internal/reader), neither built on
// the other. A Writer frames blobs into the writer core's buffers, which
// fill one while the previous ones are written, so the caller waits for
// the device only when every buffer is in flight. A Reader is the reader
// core and the blob format: single blobs with aligned reads (ReadBlob),
// many at once merged and in flight together (ReadBlobs), and a Scanner
// that walks every blob in order through the core's read-ahead window,
// the one fileio's Sequential reads through.
//
// # Crashes
//
// Writer.Synced is the logical size made durable by the last successful
// Sync or Close. After a crash (the process killed, the power cut) the
// file holds those bytes intact, then an unspecified tail: blobs written
// after the last Sync, whole or torn, and zeros. The tail is there because
// with O_DIRECT the Writer grows the file ahead of its writes (a write
// that extends a file is serialised by ext4 and xfs) and only a
// successful Close cuts it back (Sync keeps it, which spares a log an
// ftruncate and an fallocate per Sync); a Close that fails cuts the file
// back to Synced itself.
//
// To recover, a service that recorded Synced (Neon keeps the size in its
// index) opens the file with Options.Size set to it: the Reader reads the
// file as if it were that long, and a Scanner returns exactly the synced
// blobs. Without Options.Size a Scanner takes a 0x00 byte where a header
// is due as the end of the written data, which no Writer of this package
// ever puts there, so zeros grown ahead or padded are never read back as
// blobs and the scan finishes at the end of the data; a blob that the
// end of the file cuts short ends it too (Scanner.Torn); a blob torn by the
// crash may still come back with zeros in it, so a service that must not
// see one records its sizes. To go on writing, OpenAppend(path, synced,
// o) cuts the tail off and appends from the recorded size; a service that
// finds corruption instead (a *CorruptError, whose Off says where) can
// continue from there (a Scanner's End says where its blobs end). A Writer is the only writer of its file:
// Create fails if the file exists, and fsyncs the directory, so that a
// new file whose Sync returned nil survives a power cut.
//
// # Failures
//
// A Writer survives the failures a disk comes back from. When a write or
// Sync fails with ENOSPC (a full disk), EDQUOT (a quota) or EIO (a
// device error that may pass), the call returns the error and the Writer
// keeps every byte it acknowledged in its own buffers: a WriteBlob that
// returned an error appended nothing (a blob is withdrawn whole), one that
// returned an offset stays in the stream. The next call (WriteBlob, Sync,
// Close) first writes the failed buffers again; while the cause stands it
// fails the same way and loses nothing, and once it is gone (space freed,
// the device back) it succeeds and the Writer goes on. Sync rewrites from
// Synced before its fdatasync, so a Sync that returns nil covers every
// blob acknowledged before it, those of the failed calls included. Close
// does the same before it gives up; a Close that still fails cuts the
// file back to Synced, which stays intact. Grow-ahead preallocation that
// meets ENOSPC shrinks to what the data needs: a failed fallocate is
// never the error a caller sees while the data itself fits.
//
// Why this holds with O_DIRECT where the page cache's retry does not:
// after a failed fsync the kernel may already have dropped the dirty
// pages, or marked them clean, so a second fsync can return nil while the
// data is gone (PostgreSQL's "fsyncgate", 2018). dio's unsynced bytes are
// in its own aligned buffers until a Sync succeeds, and it writes them
// again itself. Through the page cache (Mode std-fs) a failed fdatasync
// whose bytes are no longer all in the Writer's buffers cannot be retried
// honestly: that error is sticky, as are errors that say the request was
// wrong (EINVAL, an unaligned write, a closed file, a Pool that failed).
// Options.Retry (a RetryPolicy) makes the Writer retry internally with
// backoff until its Context ends, telling OnRetry of each failure, as
// Neon's BufferedWriter does, instead of returning the error.
//
// A read that fails with EIO is read again sector by sector (package
// direct): ReadBlob fails only for a blob that reaches into an unreadable
// sector, ReadBlobs only at the offsets the bad sectors concern, and the
// error is a *direct.SectorError naming the bytes, matching syscall.EIO.
//
// # What the format detects
//
// Without checksums (the default, and Neon's format) a reader detects
// only what breaks the framing: unknown compression bits in a header, a
// blob running past the end of the file, zstd data that does not decode
// (or whose frame checksum fails). A flipped payload byte comes back as
// data, and ReadBlob at an offset inside a record reads a payload byte as
// a header and returns whatever bytes follow, with a nil error: the
// offsets a service keeps in its index are all that makes a read right.
//
// With Options.Checksum each blob ends in a CRC32C (Castagnoli, at many
// GB/s with the CPU's instruction) of its header and stored bytes, inside
// the blob, so the file is still a file of blobs to Neon's reader (an
// uncompressed blob reads as its payload and 4 more bytes; a zstd one
// still decodes to its payload, the CRC riding in a zstd skippable
// frame). A Reader opened with Checksum checks every blob ReadBlob,
// ReadBlobs and a Scanner return: a flipped bit anywhere in a blob, a
// changed header, a read at an offset that is not a blob's, all fail
// with an error matching ErrCorrupt (a *CorruptError naming the offset),
// never as data, but for the one chance in 2^32 that random bytes carry
// a matching CRC. After a crash a Scanner without Options.Size stops at
// the first blob the crash tore, as it stops at zeros, and says so
// (Scanner.Torn, Scanner.End): a blob whose checksum fails where the
// written data ends within 1 MiB after it, whatever sectors of the torn
// writes landed in between; with Options.Size a mismatch is always an
// error. Each blob costs 4 bytes more (12 with zstd). Checksums do not
// find a blob that is missing whole, such as a tail lost with a Sync that
// never ran: only the size a service recorded (Writer.Synced) says what
// should be there. A file is read with the Checksum it was written with, which
// nothing in it records but its blobs' seals: Open refuses a checksummed
// file opened without Checksum, telling it by its first blob; see
// Options.Checksum for what each mismatch does.
package blobio
