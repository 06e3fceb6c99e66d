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
// through a fileio.Sequential, which keeps up to Options.ReadAhead (512
// KiB while the budget lasts) in flight ahead of it, where vfs.Default
// would ask the kernel for read-ahead into the page cache with
// FADV_SEQUENTIAL; a fresh file (below) is read from memory instead.
//
// # Memory: give Pebble a block cache
//
// With O_DIRECT nothing caches what Pebble reads but Pebble's own block
// cache, whose default (pebble.Options.CacheSize) is 8 MB: on
// vfs.Default the page cache stands behind it, on pebblefs the device
// does. Size it for the memory you would otherwise leave to the page
// cache:
//
//	cache := pebble.NewCache(128 << 20) // half a 256 MiB container
//	defer cache.Unref()
//	db, err := pebble.Open(dir, &pebble.Options{FS: pebblefs.New(nil), Cache: cache})
//
// Beside the block cache and the memtables pebblefs holds two budgets
// of its own, neither growing with the number of files Pebble keeps
// open (a thousand by default):
//
//   - Options.Memory (DefaultMemory, 16 MiB): a third a pool of aligned
//     buffers that every writer fills and every read goes through
//     (readers hold none between reads), the rest the read-ahead of
//     compactions, long scans and Prefetch, never granted past it (a
//     compaction input that finds it spent reads through the pool).
//     Before it, each open sstable kept 148 KiB of read buffers of its
//     own: 87 MiB for 600 open files.
//   - Options.FreshFiles (DefaultFreshFiles: a sixteenth of the memory
//     limit, 8 MiB to 1 GiB): the sstables and blob files Pebble just
//     wrote, kept in memory as they are written and read from there
//     until removed, renamed or evicted, least recently read first, a
//     compaction's output before a memtable flush's (an L0 sstable,
//     which the next L0 compaction reads whole): the VFS's version of
//     RocksDB's prepopulate_block_cache. Compactions read what flushes
//     and compactions wrote seconds before without the device. While
//     the store's sstables and blob files fit the budget (or pass it
//     by a sixteenth at most), the ones pebblefs did not write (a
//     store reopened) or evicted fill from the disk a 256 KiB chunk at
//     a time as point reads miss, so with nothing set a store that
//     fits is read from memory, as
//     vfs.Default's page cache would serve it. A fresh file is served
//     only once its writer has closed it, and only while the inode,
//     size and modification time on disk are the ones written or
//     first read.
//     The memory of a file that goes is kept mapped for the next one,
//     within the budget, rather than unmapped: mapping and faulting in
//     new memory for every sstable cost a third of a write-heavy load's
//     CPU. In a memory cgroup they give way: within a sixty-fourth of
//     the cgroup's limit (4 to 32 MiB) they unmap chunks, least
//     recently read first, and take the memory back as the cgroup's
//     working set falls; a point reader whose file lost its chunks
//     fills it again once the store fits (MemoryStats says how much
//     they hold, may hold and gave way).
//
// Its relation to the block cache: a block read from a fresh file is
// copied into the block cache like any other, so the two hold some
// blocks twice; fresh files pay when compactions would otherwise read
// their inputs back from the device (a write-heavy store much larger
// than memory), the block cache when reads are hot. pebblefs/README.md
// has the splits measured.
//
// # Memory: give the Go heap a limit
//
// Pebble's block cache and memtables are C memory and pebblefs's budgets
// are mappings of their own, all outside the Go heap; what Pebble keeps
// on the heap (iterators, the sstable writers of flushes and
// compactions, the file cache's open tables) the runtime lets grow to
// twice what is live before it collects (GOGC=100). On vfs.Default the
// kernel reclaims page cache when that headroom meets the container's
// limit; with a block cache that took the page cache's place there is
// nothing left to reclaim, and the process is OOM-killed. GoMemoryLimit
// returns the soft limit (debug.SetMemoryLimit, GOMEMLIMIT) that keeps
// the heap within what the caches and budgets leave of the container.
// pebblefs does not set it, since it is the whole process's; a program
// running Pebble on pebblefs in a container should, once its options
// are filled:
//
//	fsys := pebblefs.New(nil)
//	opts := &pebble.Options{FS: fsys, Cache: cache}
//	debug.SetMemoryLimit(pebblefs.GoMemoryLimit(fsys, opts))
//	db, err := pebble.Open(dir, opts)
//
// Pebble's C memory comes from glibc's malloc, whose arenas (up to eight
// per CPU) keep the block-cache memory Pebble frees. In pebble-bench's
// 8× run with a block cache of half a 256 MiB cgroup, 91 MiB of
// anonymous memory were neither Go's nor Pebble's allocations (15 of
// them pebblefs's budgets) and the process was OOM-killed; with
// MALLOC_ARENA_MAX=2 in the environment that stayed at 30 MiB and it
// ran (pebblefs/README.md). Set it for a program that runs Pebble in a
// container.
// (*FS).Memory reports what pebblefs's budgets hold at a moment.
//
// # Versions
//
// pebblefs is a module of its own (github.com/dio-storage/dio/pebblefs),
// so that dio's go.mod never pulls Pebble in. The two move together: a
// release tags the same commit vX.Y.Z (dio) and pebblefs/vX.Y.Z, and
// pebblefs/go.mod requires dio vX.Y.Z, the version cut with it, so `go
// get github.com/dio-storage/dio/pebblefs@vX.Y.Z` resolves both from the
// module proxy. Its replace of dio by ../ serves work inside the tree
// only; the go command ignores it in a user's build.
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
// pebblefs is for unix systems: Linux, where it reads and writes through
// io_uring, gives way to memory cgroups and preallocates the WAL, and
// darwin, FreeBSD, NetBSD and DragonFly, where dio opens files with its
// portable direct open (F_NOCACHE on darwin) and writes with pwrite,
// with no memory cgroup, no preallocation (as vfs.Default there) and
// the smallest fresh-file default (DefaultFreshFiles: the memory limit
// is read on Linux only). OpenBSD does not build (ncw/directio has no
// port there). On windows the package holds Options and
// DefaultFreshFiles, and New does not exist: use vfs.Default.
//
// # Observing
//
// StatsOf(fsys) (or the FS's Stats method) sums what every file the FS
// opened asked for and what the device moved, closed files included:
// Stats.Write and Stats.Read are fileio's WriterStats and ReaderStats
// (write and read amplification, fdatasync latencies), FreshReads the
// reads fresh files served from memory. It finds the FS inside
// wrappers that answer Unwrap, such as vfs.WithDiskHealthChecks, with
// which pebblefs works: Options.Slow reports every file's reads, writes
// and fdatasyncs still in flight past a threshold, once each, checking
// every quarter of it; Pebble's disk-health checks, every 2 s, see the
// writes and syncs. The process's counts by operation and path are
// direct.Stats. MemoryOf(fsys) (or the FS's Memory method) says what
// the FS holds beside Pebble's caches, and finds it the same way; it
// holds it until the FS is no longer referenced (a vfs.FS has no
// Close), so drop the FS with the DB, or reopen on it. Where a
// filesystem refuses O_DIRECT the files go through the page cache
// quietly, as everywhere in dio: fallback.Probe(dir) says whether a
// directory takes O_DIRECT and why not, fallback.Stats counts the files
// opened otherwise, with the last reason.
//
//	fsys, closer := vfs.WithDiskHealthChecks(pebblefs.New(&pebblefs.Options{Slow: slow}), 5*time.Second, nil, onSlowDisk)
//	defer closer.Close()
//	...
//	s, _ := pebblefs.StatsOf(fsys)
//	m, _ := pebblefs.MemoryOf(fsys)
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
//   - Prefetch(off, n) starts reading up to 256 KiB at off into memory
//     from the read-ahead budget, in the background (readahead(2) would
//     fill the page cache); the ReadAt that follows inside it waits for
//     it and copies from it. Pebble's iterators call it on a file they
//     read in order (64 KiB growing to 256 KiB), then move to a
//     SequentialReadsOption handle, which reads ahead: ReadAhead (512
//     KiB) in flight while the budget lasts, down to 64 KiB, none (reads
//     through the buffer pool) when it is spent. A prefetch its iterator
//     never read is taken back when the budget is needed. Its buffer is
//     aligned memory outside Go's heap (64, 128 or 256 KiB), kept within
//     the budget for the next Prefetch, so a scan allocates nothing for it.
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
