//go:build linux

package crashtest_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dio-storage/dio/crashtest"
	"github.com/dio-storage/dio/fileio"
	"golang.org/x/sys/unix"
)

// fileioRecords is the fileio workload: records of random sizes appended
// to one file, a Sync after every few, each Sync's Synced marked.
type fileioRecords struct {
	syncs  int // how many Syncs
	maxRec int // the largest record
	// create makes the writer; nil: fileio.Create. The planted defects
	// put a faulty writer here.
	create func(path string) (appender, error)
	// failWrites makes the disk fail a write every few Syncs, which the
	// Writer (with Options.Retry) writes again.
	failWrites bool

	data    []byte // what the workload wrote, set by it
	ends    []int  // where each record ends in data
	retries atomic.Int64
}

// record returns the record byte off belongs to, as "record i (bytes
// a-b)", for an error to name what was lost.
func (w *fileioRecords) record(off int64) string {
	i := sort.SearchInts(w.ends, int(off)+1)
	start := 0
	if i > 0 {
		start = w.ends[i-1]
	}
	if i == len(w.ends) {
		return fmt.Sprintf("past the last record (at %d)", start)
	}
	return fmt.Sprintf("record %d (bytes %d-%d)", i, start, w.ends[i])
}

// An appender is what the workload writes through: a fileio.Writer, or a
// faulty one.
type appender interface {
	Write(p []byte) (int, error)
	Sync() error
	Synced() int64
	Close() error
}

const fileioName = "records"

func (w *fileioRecords) workload(ctx context.Context, r *crashtest.Recorder) error {
	w.data, w.ends = nil, nil
	rng := rand.New(rand.NewPCG(r.Seed, 1))
	data := stream(r.Seed, w.syncs*3*w.maxRec)
	create := w.create
	if create == nil {
		o := &fileio.Options{Retry: &fileio.RetryPolicy{
			Context:  ctx,
			MinDelay: time.Millisecond,
			OnRetry:  func(error) { w.retries.Add(1) },
		}}
		create = func(path string) (appender, error) { return fileio.Create(path, o) }
	}
	path := filepath.Join(r.Dir, fileioName)
	f, err := create(path)
	if err != nil {
		return err
	}
	if w.failWrites {
		// The file's blocks allocated now, so that a fault can be
		// set on the disk under bytes not yet written.
		if err := syscall.Fallocate(int(f.(*fileio.Writer).Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, int64(len(data))); err != nil {
			return err
		}
	}
	off := 0
	for s := range w.syncs {
		if w.failWrites && s%10 == 5 {
			if err := r.FailWrites(path, int64(off)/4096*4096, 64<<10, 1); err != nil {
				return err
			}
		}
		for range 1 + rng.IntN(5) {
			n := 1 + rng.IntN(w.maxRec)
			if off+n > len(data) {
				n = len(data) - off
			}
			if _, err := f.Write(data[off : off+n]); err != nil {
				return err
			}
			off += n
			w.ends = append(w.ends, off)
		}
		if err := f.Sync(); err != nil {
			return err
		}
		r.Mark(binary.AppendUvarint(nil, uint64(f.Synced())))
	}
	w.data = data[:off]
	return f.Close()
}

func (w *fileioRecords) check(ctx context.Context, s *crashtest.State) error {
	var synced int64
	if m := s.Last(); m != nil {
		v, _ := binary.Uvarint(m)
		synced = int64(v)
	}
	data := w.data
	path := filepath.Join(s.Dir, fileioName)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if synced > 0 {
			return fmt.Errorf("%s is gone, %d bytes synced", fileioName, synced)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Size() < synced {
		return fmt.Errorf("%s has %d bytes, %d synced: %s lost", fileioName, fi.Size(), synced, w.record(fi.Size()))
	}
	// What was synced, read as a recovering service would.
	r, err := fileio.Open(path, &fileio.Options{Size: synced})
	if err != nil {
		return err
	}
	got := make([]byte, synced)
	if _, err := r.ReadAt(got, 0); err != nil && !(errors.Is(err, io.EOF) && synced == 0) {
		r.Close()
		return fmt.Errorf("reading the %d synced bytes: %w", synced, err)
	}
	r.Close()
	if i := firstDiff(got, data[:synced]); i >= 0 {
		return fmt.Errorf("synced byte %d of %d lost (%#x, want %#x): %s", i, synced, got[i], data[i], w.record(int64(i)))
	}
	// The whole file: past Synced only bytes written there, or zeros.
	all, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for i := synced; i < int64(len(all)); i++ {
		if all[i] != 0 && (i >= int64(len(data)) || all[i] != data[i]) {
			return fmt.Errorf("phantom: byte %d (synced %d, file %d bytes) is %#x, never written there", i, synced, len(all), all[i])
		}
	}
	// The writer reopens and goes on.
	wr, err := fileio.OpenAppend(path, synced, nil)
	if err != nil {
		return fmt.Errorf("reopening at %d: %w", synced, err)
	}
	more := bytes.Repeat([]byte{0xa5}, 5000)
	if _, err := wr.Write(more); err != nil {
		return err
	}
	if err := wr.Close(); err != nil {
		return fmt.Errorf("going on from %d: %w", synced, err)
	}
	all, err = os.ReadFile(path)
	if err != nil {
		return err
	}
	if int64(len(all)) != synced+int64(len(more)) || !bytes.Equal(all[:synced], data[:synced]) || !bytes.Equal(all[synced:], more) {
		return fmt.Errorf("after going on from %d: %d bytes, not the synced ones and the new", synced, len(all))
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func TestFileio(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			w := &fileioRecords{syncs: 150, maxRec: 8000}
			mustPass(t, crashtest.Config{FS: f, Workload: w.workload, Check: w.check})
		})
	}
}

// TestFileioRetry is the fileio workload with a write failing on the disk
// every 10 Syncs: the Writer (Options.Retry) writes it again, and no crash
// state loses what a Sync acknowledged.
func TestFileioRetry(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			w := &fileioRecords{syncs: 150, maxRec: 8000, failWrites: true}
			mustPass(t, crashtest.Config{FS: f, Workload: w.workload, Check: w.check})
			t.Logf("%d writes retried", w.retries.Load())
			if w.retries.Load() < 10 {
				t.Fatalf("%d writes retried, want one per 10 Syncs", w.retries.Load())
			}
		})
	}
}
