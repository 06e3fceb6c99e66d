package pebblefs

import (
	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/fileio"
)

// Default budgets. Pebble's block cache and memtables are Pebble's own
// (pebble.Options.Cache, MemTableSize); these are what pebblefs holds
// beside them.
const (
	// DefaultMemory is Options.Memory's default: the aligned memory every
	// open file shares, writers' and readers' buffers (a third) and
	// compaction read-ahead (the rest), whatever the number of files
	// Pebble keeps open (a thousand sstables by default). With
	// DefaultFreshFiles in a 256 MiB container pebblefs holds 32 MiB
	// beside Pebble's block cache and memtables.
	DefaultMemory = 16 << 20

	// FreshFilesShare is the share of the process's memory (its memory
	// cgroup's limit, else the machine's) that Options.FreshFiles takes
	// by default, between MinFreshFiles and MaxFreshFiles: fresh files
	// stand in for the page cache that would otherwise hold what Pebble
	// just wrote, so that a store that fits in memory is read from
	// memory with nothing set, and compactions read their inputs without
	// the device. A sixteenth: 16 MiB of a 256 MiB container, 1 GiB on
	// a 16 GiB machine.
	FreshFilesShare = 16
	MinFreshFiles   = 8 << 20
	MaxFreshFiles   = 1 << 30
)

// Options configures an FS. The zero value (or a nil *Options) is
// fileio's defaults with pebblefs's budgets: O_DIRECT where the
// filesystem takes it, std-fs where it does not, DefaultMemory for the
// files' buffers, DefaultFreshFiles() for fresh files.
type Options struct {
	// IO is the I/O policy of every file: fallback.Auto (the default)
	// tries O_DIRECT and degrades to std-fs on filesystems that refuse it,
	// fallback.Direct never degrades, fallback.StdFS uses the page cache.
	IO fallback.Policy
	// BufferSize is the size of the buffers writers and readers take
	// from the budget (zero: 64 KiB); Buffers is the most one writer
	// holds (zero: fileio's default with a shared pool, 4).
	BufferSize int
	Buffers    int
	// Memory is the budget of aligned memory that every file Pebble has
	// open shares: a third of it a pool of buffers for writes and reads
	// (readers hold none between reads), the rest read-ahead for the
	// files Pebble reads in order (compactions) and for Prefetch. Zero:
	// DefaultMemory. A read that finds the pool spent gets a buffer for
	// itself until it returns, and a sequential file that finds the
	// read-ahead spent reads ahead less, down to 64 KiB (128 KiB of
	// memory, beyond the budget if it must: a compaction must not read
	// block by block): what the files hold does not grow with the number
	// of open files, only with the compactions' inputs.
	Memory int64
	// Pool, if set, is the pool of buffers every file's writes and reads
	// draw from, in place of the one Memory makes (the read-ahead is
	// still two thirds of Memory).
	Pool *aligned.Pool
	// ReadAhead is how far a file opened with vfs.SequentialReadsOption
	// (a compaction's input, a checkpoint's copy) reads ahead of Pebble,
	// while Memory's read-ahead lasts; zero: 512 KiB.
	ReadAhead int
	// FreshFiles is the budget of fresh files: the sstables and blob
	// files Pebble writes are kept in aligned memory as they are
	// written, and their reads served from it, until the file is
	// removed or renamed, or the budget is needed for newer ones (the
	// least recently read go first, compactions' outputs before
	// flushes', which a compaction's output never evicts). It is the
	// VFS's version of RocksDB's prepopulate_block_cache: compactions
	// read what flushes and compactions just wrote without going to the
	// device. While the sstables and blob files pebblefs knows of fit
	// the budget (or pass it by a sixteenth at most, as a store that
	// fits only just does while it is written), the files it did not
	// write (a store reopened) or evicted fill from the disk a 256 KiB
	// chunk at a time as Pebble's point reads miss, so a store smaller
	// than the budget is read from memory whatever wrote it, as
	// vfs.Default's page cache would serve it; a store larger still
	// fills nothing, since a chunk read for one block would push out
	// blocks read more often. Zero: DefaultFreshFiles(); negative: none.
	//
	// In a memory cgroup (a container) the fresh files give way to the
	// rest of the process: once the cgroup's working set (its memory
	// less inactive page cache) comes within a sixty-fourth of its
	// limit (4 to 32 MiB), they unmap spare chunks and then the least
	// recently read files' until it is one and a half times that below,
	// and take the memory back as the working set falls (MemoryStats'
	// FreshLimit and FreshGaveWay say how far). The kernel cannot
	// reclaim them, and without this a budget that leaves Go's heap too
	// little room gets the process OOM-killed. It looks every 50 ms
	// while the limit is far, sooner as the working set nears it, and
	// on cgroup v1 the kernel wakes it as the usage crosses two
	// headrooms below the limit, where the process may write
	// cgroup.event_control (not under a read-only /sys/fs/cgroup, as in
	// many containers) and while page cache does not keep the usage
	// above that mark (MemoryStats.FreshWoken counts the wakes): a
	// program growing 80 MiB of heap in
	// 2 MiB steps back to back, past 96 MiB of fresh files in a 160 MiB
	// cgroup, lived in 20 runs of 20 (looking every 50 ms alone, it was
	// killed in 6 of 6; looking sooner near the limit without the
	// kernel's signal, as on v2, in 2 of 6). A heap that crosses the
	// headroom faster than the watcher gets a core and unmaps still
	// outruns it (on a machine busy with other work, too), so leave the
	// heap room.
	//
	// Split one memory budget between it and Pebble's block cache by
	// where the data lives: when the store fits, enough here to hold it
	// does best, since fresh files hold whole sstables as written,
	// compressed, and compactions read them next (300,000 records, a
	// 260 MB store, in 384 MiB: 256 MiB here and a 64 MiB block cache
	// ran YCSB load, A, B, C and E at 0.91-1.33x vfs.Default, 192 MiB
	// here, short of the store, at 0.63-0.99x); when it is many times
	// the memory, the split matters little (2,000,000 records in 256
	// MiB: a 96 MiB block cache and 16 MiB here against 64 and 48,
	// every workload within 6%); see pebblefs/README.md.
	FreshFiles int64
	// Faults, for tests, injects I/O errors into every file's reads,
	// writes and fdatasyncs (see package faults), as Pebble's errorfs
	// does above the vfs.FS.
	Faults direct.Injector
	// Slow, when set, reports every file's read, write, fdatasync or
	// truncate still in flight past Slow.Threshold, with the file's name,
	// the offset and the length, once per operation, never delaying it
	// (fileio's Options.Slow). It sees what vfs.WithDiskHealthChecks sees
	// of writes and syncs, sooner (it checks every Threshold/4, Pebble's
	// every 2 s), and reads besides. nil costs nothing; an invalid one
	// fails every Create and Open with fileio.ErrInvalidOptions.
	Slow *fileio.SlowPolicy
}

// DefaultFreshFiles returns Options.FreshFiles's default: a
// FreshFilesShare-th of the memory this process may use (its memory
// cgroup's limit, else the machine's memory), between MinFreshFiles
// and MaxFreshFiles. Only Linux is read: elsewhere it is MinFreshFiles.
func DefaultFreshFiles() int64 {
	return min(max(memoryLimit()/FreshFilesShare, MinFreshFiles), MaxFreshFiles)
}
