// Package pebblefs runs CockroachDB's Pebble on dio: New returns a
// vfs.FS whose files are read and written with O_DIRECT, so that
// Pebble's block cache, not the kernel's page cache, holds what it reads,
// and its flushes and compactions leave no dirty pages to stall the
// process or evict its neighbours' (RocksDB's use_direct_reads and
// use_direct_io_for_flush_and_compaction).
//
// # What goes through O_DIRECT
//
// Every file Pebble creates or opens for reading: the WAL, sstables, blob
// files, the MANIFEST, OPTIONS and marker files. A file Pebble creates is
// written through a fileio.Writer: writes of any size (4 KiB from the
// sstable writer's bufio, pieces of 32 KiB blocks from the WAL) are
// copied into aligned buffers, whole buffers go to the device while
// Pebble fills the next, Sync writes the padded tail and fdatasyncs, and
// Close cuts the file back to its last byte. A file Pebble opens is read
// through a fileio.Reader, concurrent at any offset and length (an
// sstable's block with its 5-byte trailer); a handle opened with
// vfs.SequentialReadsOption, as Pebble opens a compaction's inputs, reads
// through a fileio.Sequential, which keeps up to Options.ReadAhead (2
// MiB) in flight ahead of it, where vfs.Default would ask the kernel for
// read-ahead into the page cache with FADV_SEQUENTIAL.
//
// # What does not, and why
//
// Names go to vfs.Default: directories and their fsync, the LOCK file,
// renames, links, removal, listings, Stat and disk usage; they are
// metadata, with no bytes to keep out of the page cache. OpenReadWrite
// goes to vfs.Default too: only Pebble's secondary cache for shared
// storage uses it, to write blocks in place with WriteAt, which an
// appending Writer does not do. Filesystems that refuse O_DIRECT (ramfs,
// some overlays) get package fallback's std-fs, through fileio, as
// everywhere in dio; Options.IO chooses otherwise.
//
// # The vfs.File contract, call by call
//
//   - Create removes an existing file and creates a new inode, never
//     O_TRUNC: sstables are hard-linked into checkpoints. It does not
//     fsync the directory (fileio's Options.NoDirSync), as vfs.Default's
//     Create does not: Pebble syncs the directory itself, once per flush,
//     compaction, WAL or MANIFEST marker, before it relies on the names.
//   - ReuseForWrite removes the old WAL and creates the new one. Pebble's
//     WAL recycling saves block allocation by overwriting an old log;
//     a fresh file is equally correct (Pebble's WAL reader stops at the
//     end of the file), and dio's writer grows the file ahead of its
//     writes anyway.
//   - SyncTo returns fullSync false at once: full buffers are already on
//     their way to the device; Sync is what makes bytes durable.
//   - Preallocate reserves blocks with FALLOC_FL_KEEP_SIZE, as
//     vfs.Default does.
//   - Stat, of a file or by name, gives the logical size, the bytes
//     Pebble wrote, whatever the disk holds (the padded tail, the blocks
//     grown ahead, what is still buffered).
//   - Prefetch does nothing: readahead(2) would fill the page cache.
//     Pebble moves a handle that keeps reading in order to a
//     SequentialReadsOption handle, which reads ahead.
//   - Fd is the real descriptor, opened with O_DIRECT.
//   - A file still being written here can be opened and read (Pebble's
//     checkpoints copy the live MANIFEST and WAL): a read past what the
//     writer has made durable syncs it first, so every byte written is
//     read back, never a hole of zeros.
//
// After a crash a file that was being written holds what its last Sync
// made durable, then an unspecified tail, often zeros: Pebble reads that
// as it reads a preallocated WAL or MANIFEST, the end of the log.
package pebblefs
