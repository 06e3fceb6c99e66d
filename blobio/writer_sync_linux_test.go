package blobio_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// logRecord is the size of a record in the log benchmarks: issue 16's
// Sync-every-100 workload.
const logRecord = 150

// BenchmarkSyncEvery appends 150-byte records with a Sync every n, as a
// log that acknowledges in batches does: through each engine, and
// through a plain os.File (one write(2) per record, fdatasync every n)
// for comparison. An op is one record.
func BenchmarkSyncEvery(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("n=%d/engine=os.File", n), func(b *testing.B) { benchSyncEveryFile(b, n) })
		for _, e := range testenv.Engines() {
			b.Run(fmt.Sprintf("n=%d/engine=%s", n, e.Name), func(b *testing.B) { benchSyncEvery(b, n, e.Policy) })
		}
	}
}

func benchSyncEvery(b *testing.B, n int, p fallback.Policy) {
	if p == fallback.Direct {
		if err := fallback.URingErrorAt(testenv.Dir(b)); err != nil {
			b.Skipf("io_uring unavailable: %v", err)
		}
	}
	w, err := blobio.Create(filepath.Join(testenv.Dir(b), "log"), &blobio.Options{IO: p})
	if errors.Is(err, direct.ErrNotSupported) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	v := record(1, logRecord)
	b.SetBytes(logRecord)
	b.ResetTimer()
	for i := range b.N {
		if _, err := w.WriteBlob(v); err != nil {
			b.Fatal(err)
		}
		if (i+1)%n == 0 {
			if err := w.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

func benchSyncEveryFile(b *testing.B, n int) {
	f, err := os.Create(filepath.Join(testenv.Dir(b), "log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rec, err := blobio.AppendHeader(nil, logRecord, blobio.None)
	if err != nil {
		b.Fatal(err)
	}
	rec = append(rec, record(1, logRecord)...)
	b.SetBytes(logRecord)
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if (i+1)%n == 0 {
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
}

// committer makes a log's appends durable in groups: each append waits
// until a sync covers it, and one sync covers every append made before
// it started (group commit, as PostgreSQL's and etcd's WALs do).
type committer struct {
	mu     sync.Mutex // guards the log and synced
	append func(p []byte) (end int64, err error)
	sync   func() (size int64, err error)
	synced int64
	syncs  int
	turn   sync.Mutex // one sync at a time; the others wait for it, then look
}

// write appends p and returns once it is durable.
func (c *committer) write(p []byte) error {
	c.mu.Lock()
	end, err := c.append(p)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.turn.Lock()
	defer c.turn.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.synced >= end {
		return nil // a sync that ran while we waited covered us
	}
	size, err := c.sync()
	if err != nil {
		return err
	}
	c.synced = size
	c.syncs++
	return nil
}

// BenchmarkGroupCommit: writers goroutines append 150-byte records, each
// waiting for its record to be durable, through one committer per file.
// An op is one record; syncs/op says how many records a sync covered.
func BenchmarkGroupCommit(b *testing.B) {
	for _, writers := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d/engine=os.File", writers), func(b *testing.B) {
			f, err := os.Create(filepath.Join(testenv.Dir(b), "log"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var size int64
			c := &committer{
				append: func(p []byte) (int64, error) {
					n, err := f.Write(p)
					size += int64(n)
					return size, err
				},
				sync: func() (int64, error) { return size, unix.Fdatasync(int(f.Fd())) },
			}
			benchGroupCommit(b, writers, c)
		})
		for _, e := range testenv.Engines() {
			b.Run(fmt.Sprintf("writers=%d/engine=%s", writers, e.Name), func(b *testing.B) {
				w, err := blobio.Create(filepath.Join(testenv.Dir(b), "log"), &blobio.Options{IO: e.Policy})
				if errors.Is(err, direct.ErrNotSupported) {
					b.Skip(err)
				}
				if err != nil {
					b.Fatal(err)
				}
				c := &committer{
					append: func(p []byte) (int64, error) {
						_, err := w.WriteBlob(p[1:]) // the header is the writer's
						return w.Size(), err
					},
					sync: func() (int64, error) { return w.Size(), w.Sync() },
				}
				benchGroupCommit(b, writers, c)
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			})
			b.Run(fmt.Sprintf("writers=%d/engine=%s/log", writers, e.Name), func(b *testing.B) {
				w, err := blobio.Create(filepath.Join(testenv.Dir(b), "log"), &blobio.Options{IO: e.Policy})
				if errors.Is(err, direct.ErrNotSupported) {
					b.Skip(err)
				}
				if err != nil {
					b.Fatal(err)
				}
				l := blobio.NewLog(w)
				benchLog(b, writers, l)
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
			})
		}
		b.Run(fmt.Sprintf("writers=%d/engine=os.File/log", writers), func(b *testing.B) {
			f, err := os.Create(filepath.Join(testenv.Dir(b), "log"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			benchFileLog(b, writers, f)
		})
	}
}

// benchLog is benchGroupCommit through a blobio.Log.
func benchLog(b *testing.B, writers int, l *blobio.Log) {
	v := record(1, logRecord)
	b.SetBytes(logRecord)
	b.ResetTimer()
	parallel(b, writers, func() error { _, err := l.Append(v); return err })
}

// benchFileLog is the os.File counterpart of a blobio.Log: appends under
// a lock, the group's fdatasync outside it.
func benchFileLog(b *testing.B, writers int, f *os.File) {
	rec, err := blobio.AppendHeader(nil, logRecord, blobio.None)
	if err != nil {
		b.Fatal(err)
	}
	rec = append(rec, record(1, logRecord)...)
	var mu, turn sync.Mutex
	var size, synced int64
	syncs := 0
	b.SetBytes(logRecord)
	b.ResetTimer()
	parallel(b, writers, func() error {
		mu.Lock()
		n, err := f.Write(rec)
		size += int64(n)
		end := size
		mu.Unlock()
		if err != nil {
			return err
		}
		turn.Lock()
		defer turn.Unlock()
		mu.Lock()
		if synced >= end {
			mu.Unlock()
			return nil
		}
		target := size
		mu.Unlock()
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return err
		}
		mu.Lock()
		synced = target
		syncs++
		mu.Unlock()
		return nil
	})
	b.ReportMetric(float64(syncs)/float64(b.N), "syncs/op")
}

// parallel runs b.N calls of op split among writers goroutines.
func parallel(b *testing.B, writers int, op func() error) {
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		n := b.N / writers
		if g < b.N%writers {
			n++
		}
		wg.Go(func() {
			for range n {
				if err := op(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

func benchGroupCommit(b *testing.B, writers int, c *committer) {
	rec, err := blobio.AppendHeader(nil, logRecord, blobio.None)
	if err != nil {
		b.Fatal(err)
	}
	rec = append(rec, record(1, logRecord)...)
	b.SetBytes(logRecord)
	b.ResetTimer()
	parallel(b, writers, func() error { return c.write(rec) })
	b.ReportMetric(float64(c.syncs)/float64(b.N), "syncs/op")
}
