//go:build unix

package pebblefs

import (
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/fileio"
)

// Stats counts the I/O of the files an FS opened since New, closed ones
// included: what Pebble asked for against what the device moved, as
// fileio's Reader and Writer count it, summed over the files. The
// process's, by operation and path, are direct.Stats.
type Stats struct {
	// Write is every file Pebble wrote (WALs, sstables, blob files,
	// MANIFESTs, OPTIONS): Write calls and bytes, the bytes the device
	// wrote (padded tails included), fdatasyncs and their latencies.
	Write fileio.WriterStats

	// Read is every file Pebble read through dio: its ReadAt calls and
	// Prefetch's reads, and the bytes the device read for them. A
	// compaction's reads of its inputs (vfs.SequentialReadsOption, a
	// fileio.Sequential) count as asked, their read-ahead in DeviceBytes.
	Read fileio.ReaderStats

	// FreshReads and FreshBytes are the reads Options.FreshFiles served
	// from memory, and their bytes: not in Read, the device read nothing.
	FreshReads, FreshBytes uint64
}

// Sub returns s minus prev, an earlier snapshot of the same FS.
func (s Stats) Sub(prev Stats) Stats {
	return Stats{Write: s.Write.Sub(prev.Write), Read: s.Read.Sub(prev.Read),
		FreshReads: s.FreshReads - prev.FreshReads, FreshBytes: s.FreshBytes - prev.FreshBytes}
}

// Stats returns the counts of every file fs opened since New.
func (fs *FS) Stats() Stats { return fs.book.stats() }

// StatsOf returns the Stats of the FS New made that fsys is, or wraps
// (vfs.WithDiskHealthChecks's FS, or any other that answers Unwrap with
// the FS inside), and false for an FS with no pebblefs inside.
func StatsOf(fsys vfs.FS) (Stats, bool) {
	if f := find(fsys); f != nil {
		return f.Stats(), true
	}
	return Stats{}, false
}

// book keeps an FS's counts: the open files', read when asked, and the
// sums of those closed since.
type book struct {
	mu      sync.Mutex
	writers map[*fileio.Writer]struct{}
	readers map[*fileio.Reader]struct{}
	closed  Stats

	freshReads, freshBytes atomic.Uint64
}

func (b *book) stats() Stats {
	b.mu.Lock()
	s := b.closed
	for w := range b.writers {
		s.Write = s.Write.Add(w.Stats())
	}
	for r := range b.readers {
		s.Read = s.Read.Add(r.Stats())
	}
	b.mu.Unlock()
	s.FreshReads, s.FreshBytes = b.freshReads.Load(), b.freshBytes.Load()
	return s
}

// fresh counts a read of n bytes served from a fresh file.
func (b *book) fresh(n int) {
	b.freshReads.Add(1)
	b.freshBytes.Add(uint64(n))
}

// writer enters w, returning it as a fileWriter whose Close moves its
// counts to the closed files'.
func (b *book) writer(w *fileio.Writer) fileWriter {
	b.mu.Lock()
	if b.writers == nil {
		b.writers = make(map[*fileio.Writer]struct{})
	}
	b.writers[w] = struct{}{}
	b.mu.Unlock()
	return bookedWriter{w, b}
}

// reader enters r, read through fr (r itself, or a Sequential over it),
// returning fr whose Close moves r's counts to the closed files'.
func (b *book) reader(r *fileio.Reader, fr fileReader) fileReader {
	b.mu.Lock()
	if b.readers == nil {
		b.readers = make(map[*fileio.Reader]struct{})
	}
	b.readers[r] = struct{}{}
	b.mu.Unlock()
	return bookedReader{fr, r, b}
}

type bookedWriter struct {
	*fileio.Writer
	b *book
}

func (w bookedWriter) Close() error {
	err := w.Writer.Close()
	w.b.mu.Lock()
	if _, ok := w.b.writers[w.Writer]; ok {
		delete(w.b.writers, w.Writer)
		w.b.closed.Write = w.b.closed.Write.Add(w.Writer.Stats())
	}
	w.b.mu.Unlock()
	return err
}

type bookedReader struct {
	fileReader
	r *fileio.Reader
	b *book
}

func (r bookedReader) Close() error {
	err := r.fileReader.Close()
	r.b.mu.Lock()
	if _, ok := r.b.readers[r.r]; ok {
		delete(r.b.readers, r.r)
		r.b.closed.Read = r.b.closed.Read.Add(r.r.Stats())
	}
	r.b.mu.Unlock()
	return err
}
