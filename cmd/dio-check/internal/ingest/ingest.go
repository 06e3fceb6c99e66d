// Package ingest is the workload of Neon's bench_ingest, as dio-check bench
// and BenchmarkIngest run it: values appended as blobs to an ephemeral file
// (seq-no-delta), then, for seq, read back in order and written into a blob
// file that is closed.
package ingest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/benchkit"
)

// The workloads.
const (
	SeqNoDelta = "seq-no-delta" // ingest into an ephemeral file only
	Seq        = "seq"          // ingest, then write every value into a blob file
)

// Workloads lists them in the order runs take them, in a new slice.
func Workloads() []string { return []string{SeqNoDelta, Seq} }

// Engine is one I/O path under comparison.
type Engine struct {
	Name   string
	Policy fallback.Policy
	Sync   bool // make the outputs durable before the clock stops
}

// Engines returns the paths dio-check compares, in Neon's order and then
// ours, in a new slice. The direct engines sync as std-fs+fsync does: their
// writes reach the device either way, and the fdatasync flushes its
// volatile cache, so they are compared doing at least the durable work.
func Engines() []Engine {
	return []Engine{
		{"std-fs", fallback.StdFS, false},
		{"std-fs+fsync", fallback.StdFS, true},
		{"direct+pwrite", fallback.DirectPwrite, true},
		{"direct+io_uring", fallback.Direct, true},
	}
}

// Config is one run.
type Config struct {
	Dir      string
	Workload string
	Engine   Engine
	Buffer   int   // bytes per buffer
	Buffers  int   // buffers per file; 0: the packages' default
	Value    int   // bytes per value
	Bytes    int64 // payload to ingest

	// Files, if set, hears of every named file the run creates and
	// removes, so that an interrupted caller can remove what is left.
	Files Tracker
}

// Tracker follows the named files of a run.
type Tracker interface {
	// MakeTemp calls mk, which makes a file or directory under a new name
	// and returns its path, such that an interrupt removes it whether it
	// comes before, during or after the call.
	MakeTemp(mk func() (string, error)) (string, error)
	// Remove removes the file or directory at path and forgets it.
	Remove(path string)
}

// Result is what a run measured.
type Result struct {
	Elapsed        time.Duration
	PageCacheBytes int64 // bytes of the outputs resident in the page cache at the end
	OutputBytes    int64 // bytes of the outputs
	// CPU is the whole process's CPU time over Elapsed (see ProcessCPU),
	// or -1 where it cannot be read.
	CPU time.Duration
}

// cpuSince returns the process's CPU time since c0 (ProcessCPU's), or -1.
func cpuSince(c0 time.Duration, ok bool) time.Duration {
	c1, ok1 := benchkit.ProcessCPU()
	if !ok || !ok1 {
		return -1
	}
	return c1 - c0
}

// MiBs returns the payload throughput in MiB/s.
func (r Result) MiBs(c Config) float64 {
	return float64(c.Bytes) / (1 << 20) / r.Elapsed.Seconds()
}

// ErrUnavailable reports an engine this directory or kernel cannot run.
var ErrUnavailable = errors.New("ingest: engine unavailable here")

// runsAt reports, as ErrUnavailable, an engine that cannot run on path
// before anything is opened: direct+io_uring where dio avoids io_uring.
func (e Engine) runsAt(path string) error {
	if e.Policy != fallback.Direct {
		return nil
	}
	if err := fallback.URingErrorAt(path); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// ran reports, as ErrUnavailable, a direct engine whose file was given
// the page cache instead: its numbers would not be the engine's.
func (e Engine) ran(m fallback.Mode) error {
	if e.Policy != fallback.StdFS && !m.Direct {
		return fmt.Errorf("%w: got %v", ErrUnavailable, m)
	}
	return nil
}

// unavailable marks an open that failed because the filesystem refuses
// O_DIRECT as ErrUnavailable, and returns any other error as it is.
func unavailable(err error) error {
	if errors.Is(err, direct.ErrNotSupported) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}

// Run performs one run and removes what it wrote.
func Run(c Config) (Result, error) {
	if c.Value <= 0 || c.Buffer <= 0 || c.Bytes < int64(c.Value) {
		return Result{}, fmt.Errorf("ingest: bad config: value %d, buffer %d, bytes %d", c.Value, c.Buffer, c.Bytes)
	}
	if err := c.Engine.runsAt(c.Dir); err != nil {
		return Result{}, err
	}
	// Start every run from a clean filesystem and device, outside the
	// clock: otherwise the run after a durable one pays for its writeback.
	if err := benchkit.Settle(c.Dir); err != nil {
		return Result{}, err
	}
	value := make([]byte, c.Value)
	for i := range value {
		value[i] = byte(i*7 + 1)
	}
	start := time.Now()
	c0, cpuOK := benchkit.ProcessCPU()
	eph, err := ephemeral.Create(c.Dir, &ephemeral.Options{BufferSize: c.Buffer, Buffers: c.Buffers, IO: c.Engine.Policy})
	if err != nil {
		return Result{}, unavailable(err)
	}
	defer eph.Close()
	if err := c.Engine.ran(eph.Mode()); err != nil {
		return Result{}, err
	}
	n := c.Bytes / int64(c.Value)
	for range n {
		if _, err := eph.WriteBlob(value); err != nil {
			return Result{}, err
		}
	}
	var res Result
	switch c.Workload {
	case SeqNoDelta:
		if c.Engine.Sync {
			err = eph.Sync()
		} else {
			err = eph.Flush()
		}
		res.Elapsed, res.CPU = time.Since(start), cpuSince(c0, cpuOK)
	case Seq:
		var work string
		work, err = c.delta(eph)
		res.Elapsed, res.CPU = time.Since(start), cpuSince(c0, cpuOK)
		if err == nil {
			defer c.remove(work)
			res.PageCacheBytes, res.OutputBytes, err = residentPath(filepath.Join(work, deltaFile))
		}
	default:
		err = fmt.Errorf("ingest: unknown workload %q", c.Workload)
	}
	if err != nil {
		return Result{}, err
	}
	r, size, err := benchkit.Resident(eph.Fd(), eph.Size())
	res.PageCacheBytes += r
	res.OutputBytes += size
	return res, err
}

// delta reads every blob of eph in order and writes it into a new blob
// file, closed (and synced when the engine syncs), in a new directory of
// its own under c.Dir, which it returns: os.MkdirTemp picks the name, and
// blobio.Create, which creates its file exclusively, takes a fixed one.
func (c Config) delta(eph *ephemeral.File) (string, error) {
	var w *blobio.Writer
	create := func() (string, error) {
		work, err := os.MkdirTemp(c.Dir, ".dio-ingest-")
		if err != nil {
			return "", err
		}
		w, err = blobio.Create(filepath.Join(work, deltaFile), &blobio.Options{BufferSize: c.Buffer, Buffers: c.Buffers, IO: c.Engine.Policy, NoSync: !c.Engine.Sync})
		if err != nil {
			os.RemoveAll(work)
			return "", err
		}
		return work, nil
	}
	var work string
	var err error
	if c.Files != nil {
		work, err = c.Files.MakeTemp(create)
	} else {
		work, err = create()
	}
	if err != nil {
		return "", err
	}
	var blob []byte
	for off, size := int64(0), eph.Size(); off < size; {
		if blob, err = eph.ReadBlob(off, blob); err == nil {
			_, err = w.WriteBlob(blob)
		}
		if err != nil {
			w.Close()
			c.remove(work)
			return "", err
		}
		off += int64(blobio.HeaderSize(len(blob), blobio.None) + len(blob))
	}
	if err := w.Close(); err != nil {
		c.remove(work)
		return "", err
	}
	return work, nil
}

// deltaFile names the blob file in delta's directory.
const deltaFile = "delta"

// remove removes path, a file or a directory, and what it holds.
func (c Config) remove(path string) {
	if c.Files != nil {
		c.Files.Remove(path)
		return
	}
	os.RemoveAll(path)
}

func residentPath(path string) (int64, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	return benchkit.Resident(f.Fd(), st.Size())
}
