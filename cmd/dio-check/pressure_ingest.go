package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/benchkit"
)

// The ingest's shapes.
const (
	// shapeAppend appends blobs to a file that rolls (synced, removed)
	// at its roll size: a log.
	shapeAppend = "append"
	// shapeCompact writes a file of compactUnit bytes, syncs it, reads
	// it back and writes every blob into a second file, synced, then
	// removes both: a flush and a compaction, as an LSM tree does, and
	// as the bench's seq workload reads back what it wrote.
	shapeCompact = "compact"
)

// compactUnit is the size of the files the compact shape writes and
// reads back: RocksDB's default write_buffer_size (64 MiB), the memtable
// a flush writes out.
const compactUnit = 64 << 20

// ingestOptions are the ingest's shape, the same for every engine.
type ingestOptions struct {
	writers int    // goroutines writing, each to files of its own
	shape   string // shapeAppend or shapeCompact
	roll    int64  // a writer's roll size; 0: from the free space (rollSize)
}

// ingestRun is one engine's ingest: its writers, each in a goroutine of
// its own, until stopped.
type ingestRun struct {
	mode   string
	dir    string
	engine string
	opts   ingestOptions
	roll   int64 // the bytes after which a writer's file is replaced
	unit   int64 // the compact shape's file size
	quit   atomic.Bool
	start  time.Time
	wg     sync.WaitGroup
	made   []atomic.Int64 // files each writer created, for tests

	mu    sync.Mutex // guards what follows, which the writers add to as they end
	stats ingestStats
	err   error
}

// rollSize is the size an ingest file rolls at with avail bytes free: a
// fast ingest into a small filesystem (the test matrix's 1 GiB ext4)
// would fill it before rollBytes and measure ENOSPC instead.
func rollSize(avail int64) int64 {
	return max(min(rollBytes, avail/4), minRoll)
}

type ingestStats struct {
	bytes   int64 // written, the compact shape's rewrites included
	elapsed time.Duration
	hist    benchkit.Histogram
}

func (s ingestStats) mibs() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.bytes) / (1 << 20) / s.elapsed.Seconds()
}

// startIngest starts the engine's writers in dir. An engine the
// directory cannot run is unavailable.
func startIngest(dir, engine string, o ingestOptions) (*ingestRun, error) {
	r := &ingestRun{dir: dir, engine: engine, opts: o, roll: o.roll}
	if avail, err := availBytes(dir); err == nil && r.roll == 0 {
		// Every writer's files at once fit in what rollSize allows one.
		r.roll = max(rollSize(avail)/int64(o.writers), minRoll)
	} else if r.roll == 0 {
		r.roll = rollBytes
	}
	r.unit = min(compactUnit, r.roll/2)
	r.made = make([]atomic.Int64, o.writers)
	// Open every writer's first file before any writes, so that an
	// engine this directory cannot run is known before the measurement.
	first := make([]ingestFile, o.writers)
	for i := range first {
		f, err := r.create(i, 0)
		if err != nil {
			for _, f := range first[:i] {
				f.closeRemove()
			}
			return nil, err
		}
		first[i] = f
	}
	r.mode = first[0].w.Mode().String()
	r.start = time.Now()
	for i, f := range first {
		r.wg.Add(1)
		go r.writer(i, f)
	}
	return r, nil
}

// path names writer i's file n.
func (r *ingestRun) path(i, n int) string {
	return filepath.Join(r.dir, fmt.Sprintf("ingest-%s-%d-%d", r.engine, i, n))
}

// ingestFile is a file a writer writes.
type ingestFile struct {
	w    *blobio.Writer
	path string
}

// create creates writer i's file n through the engine.
func (r *ingestRun) create(i, n int) (ingestFile, error) {
	p, _ := enginePolicy(r.engine)
	path := r.path(i, n)
	w, err := blobio.Create(path, &blobio.Options{IO: p})
	if errors.Is(err, direct.ErrNotSupported) {
		return ingestFile{}, unavailable(err.Error())
	}
	if err != nil {
		return ingestFile{}, err
	}
	if got := w.Mode().Name(); got != r.engine {
		w.Close()
		os.Remove(path)
		return ingestFile{}, unavailable("got " + w.Mode().String())
	}
	r.made[i].Add(1)
	return ingestFile{w, path}, nil
}

// closeRemove closes the file, which syncs it (the end of a file, as in
// the bench), and removes it.
func (f ingestFile) closeRemove() error {
	err := f.w.Close()
	os.Remove(f.path)
	return err
}

// writer is writer i's goroutine: it writes, first into w, until the run
// is stopped, then adds what it measured to the run's.
func (r *ingestRun) writer(i int, f ingestFile) {
	defer r.wg.Done()
	var st ingestStats
	var err error
	switch r.opts.shape {
	case shapeCompact:
		err = r.compact(i, f, &st)
	default:
		err = r.appendLog(i, f, &st)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.bytes += st.bytes
	r.stats.hist.Merge(&st.hist)
	if err != nil && r.err == nil {
		r.err = err
	}
}

// value returns a blob's bytes: random, so that no filesystem compresses
// or deduplicates them.
func value() []byte {
	v := make([]byte, valueSize)
	rand.Read(v)
	return v
}

// put writes one blob to w, timing it into st.
func put(w *blobio.Writer, blob []byte, st *ingestStats) error {
	t0 := time.Now()
	_, err := w.WriteBlob(blob)
	st.hist.Record(time.Since(t0))
	if err == nil {
		st.bytes += int64(len(blob))
	}
	return err
}

// appendLog is the append shape: blobs into f until it holds the roll
// size, then into the next file.
func (r *ingestRun) appendLog(i int, f ingestFile, st *ingestStats) error {
	v := value()
	var inFile int64
	for n := 1; !r.quit.Load(); {
		if err := put(f.w, v, st); err != nil {
			f.closeRemove()
			return err
		}
		if inFile += valueSize; inFile < r.roll {
			continue
		}
		if err := f.closeRemove(); err != nil {
			return err
		}
		var err error
		if f, err = r.create(i, n); err != nil {
			return err
		}
		n++
		inFile = 0
	}
	return f.closeRemove()
}

// compact is the compact shape: a file of the unit's size written into
// f and closed, read back and rewritten into a second file, closed, both
// removed; then again.
func (r *ingestRun) compact(i int, f ingestFile, st *ingestStats) error {
	v := value()
	for n := 1; ; n += 2 {
		for inFile := int64(0); inFile < r.unit && !r.quit.Load(); inFile += valueSize {
			if err := put(f.w, v, st); err != nil {
				f.closeRemove()
				return err
			}
		}
		if err := f.w.Close(); err != nil || r.quit.Load() {
			os.Remove(f.path)
			return err
		}
		err := r.rewrite(f.path, i, n, st)
		os.Remove(f.path)
		if err != nil || r.quit.Load() {
			return err
		}
		if f, err = r.create(i, n+1); err != nil {
			return err
		}
	}
}

// rewrite reads every blob of the file at src, through the engine, and
// writes it into writer i's file n, which it closes and removes.
func (r *ingestRun) rewrite(src string, i, n int, st *ingestStats) error {
	p, _ := enginePolicy(r.engine)
	rd, err := blobio.Open(src, &blobio.Options{IO: p})
	if err != nil {
		return err
	}
	defer rd.Close()
	f, err := r.create(i, n)
	if err != nil {
		return err
	}
	sc := blobio.NewScanner(rd)
	defer sc.Close()
	for sc.Scan() && !r.quit.Load() {
		if err := put(f.w, sc.Bytes(), st); err != nil {
			f.closeRemove()
			return err
		}
	}
	if err := sc.Err(); err != nil {
		f.closeRemove()
		return err
	}
	return f.closeRemove()
}

// stop ends the ingest and returns what it measured; err is the caller's
// own, which wins.
func (r *ingestRun) stop(err error) (ingestStats, error) {
	r.quit.Store(true)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.elapsed = time.Since(r.start)
	if err == nil {
		err = r.err
	}
	return r.stats, err
}
