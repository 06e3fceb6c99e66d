//go:build linux

package crashtest_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/crashtest"
)

// A blob is one record a blob workload wrote.
type blob struct {
	off  int64
	data []byte
}

// blobs is what a blob workload wrote, in file order.
type blobs []blob

func (b blobs) at(off int64) (blob, bool) {
	i := sort.Search(len(b), func(i int) bool { return b[i].off >= off })
	if i < len(b) && b[i].off == off {
		return b[i], true
	}
	return blob{}, false
}

// before returns the blobs that start before size.
func (b blobs) before(size int64) blobs {
	return b[:sort.Search(len(b), func(i int) bool { return b[i].off >= size })]
}

// blobPayload is the data of blob i of a workload.
func blobPayload(rng *rand.Rand, i int) []byte {
	n := 1 + rng.IntN(8000)
	if rng.IntN(3) == 0 {
		n = 1 + rng.IntN(127) // a 1-byte header
	}
	p := make([]byte, n)
	for k := range p {
		p[k] = byte(rng.Uint32()) | 1 // never zero, so that a torn byte shows
	}
	_ = i
	return p
}

// blobRecords is the blobio workload: blobs of random sizes, a Sync after
// every few, each Sync's Synced marked.
type blobRecords struct {
	syncs    int
	checksum bool

	wrote blobs
	stats scanStats
}

const blobName = "blobs"

func (w *blobRecords) workload(ctx context.Context, r *crashtest.Recorder) error {
	w.wrote = nil
	rng := rand.New(rand.NewPCG(r.Seed, 2))
	f, err := blobio.Create(filepath.Join(r.Dir, blobName), &blobio.Options{Checksum: w.checksum})
	if err != nil {
		return err
	}
	for range w.syncs {
		for range 1 + rng.IntN(6) {
			p := blobPayload(rng, len(w.wrote))
			off, err := f.WriteBlob(p)
			if err != nil {
				return err
			}
			w.wrote = append(w.wrote, blob{off, p})
		}
		if err := f.Sync(); err != nil {
			return err
		}
		r.Mark(binary.AppendUvarint(nil, uint64(f.Synced())))
	}
	return f.Close()
}

// scanStats counts how the Scanners without Options.Size ended, over the
// states of a run.
type scanStats struct {
	mu                           sync.Mutex
	clean, torn, corrupt, zeroed int
	unacked                      int // blobs past Synced returned whole
}

func (s *scanStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("Scanner without Options.Size: %d ended cleanly, %d with Torn(), %d with ErrCorrupt past Synced; %d unacknowledged blobs returned whole, %d with zeros in them",
		s.clean, s.torn, s.corrupt, s.unacked, s.zeroed)
}

func (w *blobRecords) check(ctx context.Context, s *crashtest.State) error {
	var synced int64
	if m := s.Last(); m != nil {
		v, _ := binary.Uvarint(m)
		synced = int64(v)
	}
	path := filepath.Join(s.Dir, blobName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if synced > 0 {
			return fmt.Errorf("%s is gone, %d bytes synced", blobName, synced)
		}
		return nil
	}
	acked := w.wrote.before(synced)
	if err := checkBlobs(path, synced, acked, w.checksum, s.Seed); err != nil {
		return err
	}
	if err := w.scanAll(path, synced, acked); err != nil {
		return err
	}
	// The writer reopens and goes on.
	o := &blobio.Options{Checksum: w.checksum}
	wr, err := blobio.OpenAppend(path, synced, o)
	if err != nil {
		return fmt.Errorf("reopening at %d: %w", synced, err)
	}
	more := []byte("written after the crash")
	off, err := wr.WriteBlob(more)
	if err != nil {
		return err
	}
	if err := wr.Close(); err != nil {
		return fmt.Errorf("going on from %d: %w", synced, err)
	}
	return checkBlobs(path, 0, append(acked[:len(acked):len(acked)], blob{off, more}), w.checksum, 0)
}

// checkBlobs reads the file as a recovering service does, with Options.Size
// (size 0: the file's own), and wants exactly want by a Scanner; with a
// seed, also by ReadBlobs of every offset and by ReadBlob at some (reads
// of a few blocks each: all of them would make the check the run's
// largest cost).
func checkBlobs(path string, size int64, want blobs, checksum bool, seed uint64) error {
	if size == 0 && len(want) == 0 {
		return nil
	}
	r, err := blobio.Open(path, &blobio.Options{Size: size, Checksum: checksum})
	if err != nil {
		return err
	}
	defer r.Close()
	sc := blobio.NewScanner(r)
	i := 0
	for ; sc.Scan(); i++ {
		if i >= len(want) {
			return fmt.Errorf("phantom: the scan up to %d returned a blob at %d past the %d acknowledged", size, sc.Offset(), len(want))
		}
		if sc.Offset() != want[i].off || !bytes.Equal(sc.Bytes(), want[i].data) {
			return fmt.Errorf("acknowledged blob %d (offset %d, %d bytes) lost: the scan up to %d returned %d bytes at %d", i, want[i].off, len(want[i].data), size, len(sc.Bytes()), sc.Offset())
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("the scan up to %d after %d of %d acknowledged blobs: %w", size, i, len(want), err)
	}
	if i < len(want) {
		return fmt.Errorf("acknowledged blob %d (offset %d) lost: the scan up to %d ended after %d", i, want[i].off, size, i)
	}
	if seed == 0 || len(want) == 0 {
		return nil
	}
	var dst []byte
	rng := rand.New(rand.NewPCG(seed, uint64(size)))
	for range 16 {
		k := rng.IntN(len(want))
		b := want[k]
		if dst, err = r.ReadBlob(b.off, dst); err != nil || !bytes.Equal(dst, b.data) {
			return fmt.Errorf("acknowledged blob %d at %d: ReadBlob returned %d bytes, %v", k, b.off, len(dst), err)
		}
	}
	offs := make([]int64, len(want))
	for k, b := range want {
		offs[k] = b.off
	}
	return r.ReadBlobs(offs, func(k int, p []byte) error {
		if !bytes.Equal(p, want[k].data) {
			return fmt.Errorf("acknowledged blob %d at %d: ReadBlobs returned %d bytes, not its own", k, want[k].off, len(p))
		}
		return nil
	})
}

// scanAll scans the whole file without Options.Size, as a service that
// kept no sizes does: every acknowledged blob first; past them, with
// checksums only blobs exactly as written; without, blobs at the offsets
// written whose bytes are each as written or zero (a torn blob, which the
// package doc allows), and the scan must end.
func (w *blobRecords) scanAll(path string, synced int64, acked blobs) error {
	r, err := blobio.Open(path, &blobio.Options{Checksum: w.checksum})
	if err != nil {
		return err
	}
	defer r.Close()
	sc := blobio.NewScanner(r)
	i := 0
	var unacked, zeroed int
	for ; sc.Scan(); i++ {
		off, got := sc.Offset(), sc.Bytes()
		if i < len(acked) {
			if off != acked[i].off || !bytes.Equal(got, acked[i].data) {
				return fmt.Errorf("acknowledged blob %d (offset %d) lost: the scan without Size returned %d bytes at %d", i, acked[i].off, len(got), off)
			}
			continue
		}
		b, ok := w.wrote.at(off)
		switch {
		case !ok:
			return fmt.Errorf("phantom: the scan without Size returned a blob at %d (%d bytes), where no blob was written", off, len(got))
		case bytes.Equal(got, b.data):
			unacked++
		case w.checksum:
			return fmt.Errorf("phantom: the checksummed scan without Size returned %d bytes at %d, not the %d written there", len(got), off, len(b.data))
		case !zeroedCopy(got, b.data):
			return fmt.Errorf("phantom: the scan without Size returned %d bytes at %d that were never written there (the blob has %d)", len(got), off, len(b.data))
		default:
			zeroed++
		}
	}
	if i < len(acked) {
		return fmt.Errorf("acknowledged blob %d (offset %d) lost: the scan without Size ended after %d blobs (err %v)", i, acked[i].off, i, sc.Err())
	}
	w.stats.mu.Lock()
	defer w.stats.mu.Unlock()
	w.stats.unacked += unacked
	w.stats.zeroed += zeroed
	switch err := sc.Err(); {
	case err == nil && sc.Torn():
		w.stats.torn++
	case err == nil:
		w.stats.clean++
	case errors.Is(err, blobio.ErrCorrupt) && w.checksum:
		// Past every acknowledged blob: what a torn tail may give
		// (see Scanner.Torn); the blobs before it were all there.
		w.stats.corrupt++
	default:
		return fmt.Errorf("the scan without Size, past the %d acknowledged blobs: %w", len(acked), err)
	}
	return nil
}

// zeroedCopy reports whether got is want with some bytes zero, or a prefix
// of such (a header torn short).
func zeroedCopy(got, want []byte) bool {
	for k, c := range got {
		if c != 0 && (k >= len(want) || c != want[k]) {
			return false
		}
	}
	return true
}

func TestBlobio(t *testing.T) {
	for _, f := range filesystems {
		for _, sum := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/checksum=%v", f, sum), func(t *testing.T) {
				w := &blobRecords{syncs: 150, checksum: sum}
				mustPass(t, crashtest.Config{FS: f, Workload: w.workload, Check: w.check})
				t.Log(&w.stats)
			})
		}
	}
}

// logRecords is the blobio.Log workload: goroutines appending blobs, each
// acknowledged (marked) once Append returned.
type logRecords struct {
	writers, appends int

	mu    sync.Mutex
	wrote blobs
}

func (w *logRecords) workload(ctx context.Context, r *crashtest.Recorder) error {
	w.wrote = nil
	f, err := blobio.Create(filepath.Join(r.Dir, blobName), &blobio.Options{Checksum: true})
	if err != nil {
		return err
	}
	l := blobio.NewLog(f)
	var wg sync.WaitGroup
	errs := make([]error, w.writers)
	for g := range w.writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(r.Seed, uint64(100+g)))
			for range w.appends {
				p := blobPayload(rng, 0)
				off, err := l.Append(p)
				if err != nil {
					errs[g] = err
					return
				}
				w.mu.Lock()
				w.wrote = append(w.wrote, blob{off, p})
				w.mu.Unlock()
				r.Mark(binary.AppendUvarint(nil, uint64(off)))
			}
		})
	}
	wg.Wait()
	sort.Slice(w.wrote, func(i, j int) bool { return w.wrote[i].off < w.wrote[j].off })
	return errors.Join(errors.Join(errs...), l.Close())
}

func (w *logRecords) check(ctx context.Context, s *crashtest.State) error {
	if len(s.Marks) == 0 {
		return nil
	}
	var acked blobs
	for _, m := range s.Marks {
		v, _ := binary.Uvarint(m)
		b, _ := w.wrote.at(int64(v))
		acked = append(acked, b)
	}
	sort.Slice(acked, func(i, j int) bool { return acked[i].off < acked[j].off })
	path := filepath.Join(s.Dir, blobName)
	r, err := blobio.Open(path, &blobio.Options{Checksum: true})
	if err != nil {
		return fmt.Errorf("%d blobs acknowledged: %w", len(acked), err)
	}
	defer r.Close()
	// A scan as a WAL's recovery does: every acknowledged blob, in
	// order, and nothing that was not written.
	sc := blobio.NewScanner(r)
	k := 0
	for sc.Scan() {
		b, ok := w.wrote.at(sc.Offset())
		if !ok || !bytes.Equal(sc.Bytes(), b.data) {
			return fmt.Errorf("phantom: the log's scan returned %d bytes at %d, never written there", len(sc.Bytes()), sc.Offset())
		}
		if k < len(acked) && acked[k].off == sc.Offset() {
			k++
		}
	}
	if k < len(acked) {
		return fmt.Errorf("acknowledged blob at %d (%d bytes) lost: the log's scan ended at %d (%v, torn %v)", acked[k].off, len(acked[k].data), sc.End(), sc.Err(), sc.Torn())
	}
	if err := sc.Err(); err != nil && !errors.Is(err, blobio.ErrCorrupt) {
		return err
	}
	var dst []byte
	for _, b := range acked {
		if dst, err = r.ReadBlob(b.off, dst); err != nil || !bytes.Equal(dst, b.data) {
			return fmt.Errorf("acknowledged blob at %d: ReadBlob returned %d bytes, %v", b.off, len(dst), err)
		}
	}
	return nil
}

func TestLog(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			w := &logRecords{writers: 4, appends: 100}
			mustPass(t, crashtest.Config{FS: f, Workload: w.workload, Check: w.check})
		})
	}
}
