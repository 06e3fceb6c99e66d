package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/benchkit"
)

// Read is the read workload: random blobs read back from a blob file,
// the way a page server serves lookups (issue 13).
const Read = "read"

// BlobSize is the read workload's blob: 4,000 bytes, which with its
// 4-byte header is about a 4 KiB device read, the size fio's reference
// rows read.
const BlobSize = 4000

// blobRecord is a blob with its header, as the file holds it.
var blobRecord = int64(blobio.HeaderSize(BlobSize, blobio.None) + BlobSize)

// The ways a read run reads.
const (
	ReadBlob  = "ReadBlob"  // blobio.Reader.ReadBlob, Readers goroutines sharing one Reader
	ReadBlobs = "ReadBlobs" // blobio.Reader.ReadBlobs, Batch random offsets per call
	Pread     = "pread"     // plain O_DIRECT pread of each blob's aligned span: the reference
)

// ReadEngines returns the Reader's I/O paths the read workload compares,
// in a new slice. Nothing is written, so nothing syncs.
func ReadEngines() []Engine {
	return []Engine{
		{"std-fs", fallback.StdFS, false},
		{"direct+pwrite", fallback.DirectPwrite, false},
		{"direct+io_uring", fallback.Direct, false},
	}
}

// ReadConfig is one read run over a file written by WriteBlobFile.
type ReadConfig struct {
	Path     string
	Offsets  []int64 // the file's blobs, as WriteBlobFile returned them
	Method   string  // ReadBlob, ReadBlobs or Pread
	Engine   Engine  // the Reader's I/O path; Pread ignores it
	Readers  int     // goroutines, each reading one blob at a time (ReadBlob, Pread)
	Batch    int     // offsets per ReadBlobs call, from one goroutine
	Duration time.Duration
	Seed     uint64 // picks the random offsets

	// Cached starts the run with the whole file in the page cache instead
	// of none of it: what std-fs reads of a file that fits in memory come
	// to, a measurement of memory rather than of the device.
	Cached bool
}

// ReadResult is what a read run measured.
type ReadResult struct {
	Reads   int64
	Bytes   int64 // blob bytes returned
	Elapsed time.Duration
	CPU     time.Duration // the whole process's over Elapsed (see ProcessCPU), or -1
	// PageCacheBytes is how much of the file was resident in the page
	// cache when the run ended; it started at none (see DropCache), or
	// all with Cached. A direct run leaves none, except on btrfs: it reads
	// the rest of a direct read through the page cache when the buffer's
	// pages are absent on two tries running (btrfs_direct_read; moved by
	// compaction, now and then), up to a merged read's span and its
	// read-ahead (docs/performance.md).
	PageCacheBytes int64
}

// ReadsPerSec returns the reads (blobs) per second.
func (r ReadResult) ReadsPerSec() float64 { return float64(r.Reads) / r.Elapsed.Seconds() }

// MiBs returns Bytes per second in MiB/s.
func (r ReadResult) MiBs() float64 { return float64(r.Bytes) / (1 << 20) / r.Elapsed.Seconds() }

// blobsReader is ReadBlobs, asserted at run time so that the workload
// builds against a blobio without it (it lands on another branch).
type blobsReader interface {
	ReadBlobs(offs []int64, fn func(i int, blob []byte) error) error
}

// HasReadBlobs reports whether this build's blobio.Reader has ReadBlobs.
func HasReadBlobs() bool {
	_, ok := any((*blobio.Reader)(nil)).(blobsReader)
	return ok
}

// errBadBlob reports a blob that does not hold what WriteBlobFile wrote
// at its offset: a reader that returned the wrong bytes.
var errBadBlob = errors.New("ingest: read back a wrong blob")

// WriteBlobFile creates a blob file at path (which must not exist) of
// random BlobSize-byte blobs, about size bytes in all, closes it (synced)
// and returns the blobs' offsets. Each blob begins with its own offset,
// so that a read of the wrong blob is caught.
func WriteBlobFile(path string, size int64) ([]int64, error) {
	n := size / blobRecord
	if n < 1 {
		return nil, fmt.Errorf("ingest: a blob file of %d bytes holds no %d-byte blob", size, BlobSize)
	}
	w, err := blobio.Create(path, nil)
	if err != nil {
		return nil, err
	}
	rng := rand.NewChaCha8([32]byte{})
	blob := make([]byte, BlobSize)
	offs := make([]int64, 0, n)
	for range n {
		rng.Read(blob)
		binary.LittleEndian.PutUint64(blob, uint64(blobRecord*int64(len(offs))))
		off, err := w.WriteBlob(blob)
		if err == nil && off != blobRecord*int64(len(offs)) {
			err = fmt.Errorf("ingest: blob %d written at %d, not %d", len(offs), off, blobRecord*int64(len(offs)))
		}
		if err != nil {
			w.Close()
			return nil, err
		}
		offs = append(offs, off)
	}
	return offs, w.Close()
}

// checkBlob reports whether blob is the one WriteBlobFile wrote at off.
func checkBlob(off int64, blob []byte) error {
	if len(blob) != BlobSize || int64(binary.LittleEndian.Uint64(blob)) != off {
		return fmt.Errorf("%w: at %d, %d bytes", errBadBlob, off, len(blob))
	}
	return nil
}

// RunRead drops the file from the page cache (or with c.Cached reads it
// whole into it), then reads random blobs from it for c.Duration.
func RunRead(c ReadConfig) (ReadResult, error) {
	if len(c.Offsets) == 0 || c.Duration <= 0 {
		return ReadResult{}, fmt.Errorf("ingest: bad read config: %d offsets, duration %v", len(c.Offsets), c.Duration)
	}
	if (c.Method == ReadBlobs && c.Batch < 1) || (c.Method != ReadBlobs && c.Readers < 1) {
		return ReadResult{}, fmt.Errorf("ingest: bad read config: %s with %d readers, batch %d", c.Method, c.Readers, c.Batch)
	}
	// A cached file would measure memory, not the device: every run starts
	// cold, the direct ones too (their reads skip the cache, but the
	// kernel writes back dirty pages of the range first).
	if err := benchkit.DropCache(c.Path); err != nil {
		return ReadResult{}, err
	}
	if c.Cached {
		if err := warm(c.Path); err != nil {
			return ReadResult{}, err
		}
	}
	var (
		res ReadResult
		err error
	)
	switch c.Method {
	case ReadBlob, ReadBlobs:
		res, err = c.readBlobs()
	case Pread:
		res, err = c.pread()
	default:
		err = fmt.Errorf("ingest: unknown read method %q", c.Method)
	}
	if err != nil {
		return ReadResult{}, err
	}
	res.PageCacheBytes, _, err = residentPath(c.Path)
	return res, err
}

// readBlobs runs ReadBlob or ReadBlobs on one Reader opened with the
// engine's policy.
func (c ReadConfig) readBlobs() (ReadResult, error) {
	if err := c.Engine.runsAt(c.Path); err != nil {
		return ReadResult{}, err
	}
	r, err := blobio.Open(c.Path, &blobio.Options{IO: c.Engine.Policy})
	if err != nil {
		return ReadResult{}, unavailable(err)
	}
	defer r.Close()
	if err := c.Engine.ran(r.Mode()); err != nil {
		return ReadResult{}, err
	}
	if c.Method == ReadBlobs {
		rb, ok := any(r).(blobsReader)
		if !ok {
			return ReadResult{}, fmt.Errorf("%w: this blobio.Reader has no ReadBlobs", ErrUnavailable)
		}
		return c.batches(rb)
	}
	return c.parallel(func() (func(off int64) (int64, error), func()) {
		var dst []byte
		return func(off int64) (int64, error) {
			var err error
			if dst, err = r.ReadBlob(off, dst); err != nil {
				return 0, err
			}
			return int64(len(dst)), checkBlob(off, dst)
		}, func() {}
	})
}

// batches calls ReadBlobs with c.Batch random offsets at a time, from
// this goroutine, until the time is up.
func (c ReadConfig) batches(r blobsReader) (ReadResult, error) {
	rng := rand.New(rand.NewPCG(c.Seed, 0))
	offs := make([]int64, c.Batch)
	var res ReadResult
	start := time.Now()
	c0, cpuOK := benchkit.ProcessCPU()
	deadline := start.Add(c.Duration)
	for first := true; first || time.Now().Before(deadline); first = false { // at least one batch, however late
		for i := range offs {
			offs[i] = c.Offsets[rng.IntN(len(c.Offsets))]
		}
		err := r.ReadBlobs(offs, func(i int, blob []byte) error {
			res.Bytes += int64(len(blob))
			return checkBlob(offs[i], blob)
		})
		if err != nil {
			return ReadResult{}, err
		}
		res.Reads += int64(len(offs))
	}
	res.Elapsed, res.CPU = time.Since(start), cpuSince(c0, cpuOK)
	return res, nil
}

// Spans returns the offset alignment of the file at path opened with
// O_DIRECT and, by size, how many of the blobs at offs take an aligned span
// of that size: what a direct Reader reads for each (and Pread does), for a
// reference that reads requests of the same sizes. A 4,000-byte blob and
// its header fit one 4 KiB block only when the record starts in its first
// 92 bytes; any other takes two, and at 512-byte alignment a span of 4,608
// bytes, which a 4 KiB read does not measure.
func Spans(path string, offs []int64) (sizes map[int64]int, align int64, err error) {
	f, err := direct.Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, unavailable(err)
	}
	defer f.Close()
	align = int64(f.Alignment().Offset)
	sizes = map[int64]int{}
	for _, off := range offs {
		sizes[aligned.Up(off+blobRecord, align)-aligned.Down(off, align)]++
	}
	return sizes, align, nil
}

// pread reads each blob's aligned span with pread on one O_DIRECT file
// shared by the goroutines, as the least a direct reader must do.
func (c ReadConfig) pread() (ReadResult, error) {
	f, err := direct.Open(c.Path, os.O_RDONLY, 0)
	if err != nil {
		return ReadResult{}, unavailable(err)
	}
	defer f.Close()
	a := f.Alignment()
	al := int64(a.Offset)
	// The longest span: a record that starts just past a block boundary.
	span := int(aligned.Up(blobRecord+al, int64(a.Block())))
	hs := blobRecord - BlobSize
	return c.parallel(func() (func(off int64) (int64, error), func()) {
		buf, err := aligned.New(span, a.Memory)
		if err != nil {
			return func(int64) (int64, error) { return 0, err }, func() {}
		}
		return func(off int64) (int64, error) {
			lo, hi := aligned.Down(off, al), aligned.Up(off+blobRecord, al)
			n, err := f.ReadAt(buf.Bytes()[:hi-lo], lo)
			// The last blob's span may end past the end of the file.
			if err != nil && (err != io.EOF || int64(n) < off-lo+blobRecord) {
				return 0, fmt.Errorf("ingest: pread at %d: %d bytes: %w", lo, n, err)
			}
			return BlobSize, checkBlob(off, buf.Bytes()[off-lo+hs:][:BlobSize])
		}, buf.Free
	})
}

// parallel runs c.Readers goroutines, each with the read function (and
// its cleanup) that newRead makes it, on random offsets until the time is
// up, and sums what they read. The clock starts when all are ready.
func (c ReadConfig) parallel(newRead func() (read func(off int64) (int64, error), done func())) (ReadResult, error) {
	type tally struct {
		reads, bytes int64
		err          error
	}
	tallies := make([]tally, c.Readers)
	var ready, wg sync.WaitGroup
	ready.Add(c.Readers)
	begin := make(chan struct{})
	var deadline time.Time
	for g := range c.Readers {
		wg.Go(func() {
			read, done := newRead()
			defer done()
			rng := rand.New(rand.NewPCG(c.Seed, uint64(g)))
			ready.Done()
			<-begin
			t := &tallies[g]
			// At least one read each: on a loaded machine a reader can
			// wake after the deadline, and a row of no reads says nothing.
			for first := true; first || time.Now().Before(deadline); first = false {
				n, err := read(c.Offsets[rng.IntN(len(c.Offsets))])
				if err != nil {
					t.err = err
					return
				}
				t.reads++
				t.bytes += n
			}
		})
	}
	ready.Wait()
	start := time.Now()
	c0, cpuOK := benchkit.ProcessCPU()
	deadline = start.Add(c.Duration)
	close(begin)
	wg.Wait()
	res := ReadResult{Elapsed: time.Since(start), CPU: cpuSince(c0, cpuOK)}
	for _, t := range tallies {
		if t.err != nil {
			return ReadResult{}, t.err
		}
		res.Reads += t.reads
		res.Bytes += t.bytes
	}
	return res, nil
}

// warm reads the file at path whole through the page cache.
func warm(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}
