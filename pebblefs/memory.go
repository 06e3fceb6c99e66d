//go:build unix

package pebblefs

import "github.com/cockroachdb/pebble/v2/vfs"

// MemoryStats is the memory an FS holds beside Pebble's block cache and
// memtables, at one moment: every byte of it comes from Options.Memory
// (Buffers and ReadAhead) or Options.FreshFiles (Fresh), whatever the
// number of files Pebble keeps open. Beyond it pebblefs holds only what
// a read in progress borrows when the buffer pool is spent (one buffer
// per read, freed when it returns) and each open file's descriptor and
// bookkeeping on the Go heap (under 2 KiB a file).
type MemoryStats struct {
	// Buffers is the buffer pool's memory, buffers in use or idle: at
	// most a third of Options.Memory, or Options.Pool's.
	Buffers int64
	// ReadAhead is the read-ahead the files Pebble reads in order hold,
	// and Prefetch's buffers, in use or kept for the next Prefetches
	// (at most half of it): at most two thirds of Options.Memory.
	ReadAhead int64
	// Fresh is the fresh files' memory, their chunks and the spare chunks
	// removed files left for the next ones (kept mapped: mapping and
	// faulting in fresh memory for every sstable cost more CPU than the
	// copy): at most Options.FreshFiles.
	Fresh int64
	// FreshLimit is what Fresh may hold now: Options.FreshFiles, less
	// what the fresh files gave back as this process's memory cgroup
	// neared its limit (they unmap chunks within a sixty-fourth of
	// it, 4 to 32 MiB, and grow back once the cgroup has twice that
	// room). FreshGaveWay counts the bytes they unmapped for it since
	// New.
	FreshLimit, FreshGaveWay int64
	// FreshWoken counts the times since New that the kernel woke the
	// watcher behind FreshLimit as the cgroup's usage crossed two
	// headrooms below its limit: cgroup v1 only, where the process may
	// write cgroup.event_control (not under a read-only /sys/fs/cgroup,
	// as in many containers). Zero where it polls alone: every 50 ms
	// while the limit is far, down to every millisecond near it.
	FreshWoken int64
	// ReadAheadDenied counts the sequential opens (compaction inputs,
	// long scans) that got no read-ahead since New because the budget
	// was spent: they read through the buffer pool. Many of them say
	// Options.Memory is too small for the compactions that run at once.
	ReadAheadDenied int64
}

// Total returns the bytes held: Buffers, ReadAhead and Fresh.
func (m MemoryStats) Total() int64 { return m.Buffers + m.ReadAhead + m.Fresh }

// Memory returns what fs holds now beside Pebble's block cache and
// memtables.
func (fs *FS) Memory() MemoryStats {
	var m MemoryStats
	if fs.pool != nil {
		ps := fs.pool.Stats()
		m.Buffers = int64(ps.Allocated) * int64(ps.BufferSize)
	}
	fs.ahead.mu.Lock()
	m.ReadAhead, m.ReadAheadDenied = fs.ahead.used, fs.ahead.denied
	fs.ahead.mu.Unlock()
	m.Fresh, m.FreshLimit, m.FreshGaveWay, m.FreshWoken = fs.fresh.memory()
	return m
}

// MemoryOf returns the MemoryStats of the FS New made that fsys is, or
// wraps, as StatsOf finds it, and false for an FS with no pebblefs
// inside.
func MemoryOf(fsys vfs.FS) (MemoryStats, bool) {
	if f := find(fsys); f != nil {
		return f.Memory(), true
	}
	return MemoryStats{}, false
}
