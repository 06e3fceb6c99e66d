package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/benchkit"
	"github.com/dio-storage/dio/internal/cgroup"
)

// The co-tenant's and the ingest's shapes, from the issue: 4 KiB random
// reads of the hot file, 8 KiB blobs.
const (
	readSize  = 4096
	valueSize = 8 << 10
	// rollBytes bounds one ingest file: past it the writer closes it
	// (synced), removes it and starts the next, so that a long run does
	// not fill the disk. On a filesystem with less than four times that
	// free, a quarter of the free space (rollSize), at least minRoll.
	rollBytes = 4 << 30
	minRoll   = 16 << 20
	hotChunk  = 1 << 20 // bytes per write and read when making and warming the hot file
)

// pressureChild is the measuring process: it moves itself into the cgroup,
// makes and warms the hot file there, and measures the co-tenant alone
// and beside each engine's ingest, printing pressureMsg lines.
func pressureChild(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet(pressureChildCmd, flag.ContinueOnError)
	cgDir := fs.String("cgroup", "", "the cgroup to join")
	cgVersion := fs.Int("cgroup-version", 0, "its version")
	hot := fs.Int64("hot", 0, "hot file bytes")
	seconds := fs.Int("seconds", 0, "seconds per phase")
	rounds := fs.Int("rounds", 1, "rounds")
	engines := fs.String("engines", "", "engines")
	writers := fs.Int("writers", 1, "ingest writers")
	shape := fs.String("shape", shapeAppend, "ingest shape")
	lead := fs.Int("lead", 0, "seconds the ingest runs before the co-tenant")
	if err := fs.Parse(args); err != nil {
		return usageError{msg: err.Error()}
	}
	if fs.NArg() != 1 || *cgDir == "" || *hot < readSize || *seconds < 1 || *writers < 1 || *lead < 0 {
		return usageError{msg: pressureChildCmd + " is run by dio-check pressure"}
	}
	work := fs.Arg(0)
	cg := cgroup.Open(cgroup.OS{}, *cgDir, cgroup.Version(*cgVersion))
	defer cg.Close()
	// Before anything is allocated or read: what this process charges
	// from here on is the cgroup's.
	if err := cg.Join(os.Getpid()); err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	emit := func(m pressureMsg) error { return enc.Encode(m) }

	emit(pressureMsg{Phase: "setup", Step: "writing the hot file"})
	hotPath := filepath.Join(work, "hot")
	hotf, err := benchkit.WriteHot(hotPath, *hot)
	if err != nil {
		return err
	}
	defer hotf.Close()
	res, err := benchkit.NewResidency(hotf, *hot)
	if err != nil {
		return err
	}
	defer res.Close()

	m := &measurer{hotf: hotf, hotPath: hotPath, hot: *hot, res: res, work: work, cg: cg, d: time.Duration(*seconds) * time.Second, emit: emit,
		ingest: ingestOptions{writers: *writers, shape: *shape}, lead: time.Duration(*lead) * time.Second}
	phases := append([]string{alone}, strings.Split(*engines, ",")...)
	for round := 1; round <= *rounds; round++ {
		if err := m.round(phases, round, *rounds); err != nil {
			return err
		}
	}
	return nil
}

// measurer is what every phase of the measuring process uses.
type measurer struct {
	hotf    *os.File
	hotPath string
	hot     int64
	res     *benchkit.Residency
	work    string
	cg      *cgroup.Cgroup
	d       time.Duration
	emit    func(pressureMsg) error
	ingest  ingestOptions
	lead    time.Duration // how long the ingest runs before the co-tenant is measured
}

// round measures the co-tenant alone and beside each engine once.
func (m *measurer) round(phases []string, round, rounds int) error {
	hotf, hot, res, work, cg, d, emit := m.hotf, m.hot, m.res, m.work, m.cg, m.d, m.emit
	var err error
	for _, phase := range phases {
		label := phase
		if rounds > 1 {
			label = fmt.Sprintf("round %d/%d: %s", round, rounds, phase)
		}
		emit(pressureMsg{Phase: label, Step: "warming the hot file"})
		if err := warm(hotf, hot); err != nil {
			return err
		}
		// Start from a clean filesystem: the last phase's writeback
		// is not this one's.
		if err := benchkit.Settle(work); err != nil {
			return err
		}
		// A v2 kernel before 6.12 cannot reset the peak: the rows
		// then carry the peak since the cgroup was made, and say so.
		if err := cg.ResetPeak(); errors.Is(err, cgroup.ErrPeakNotReset) {
			emit(pressureMsg{Note: err.Error()})
		} else if err != nil {
			return err
		}
		var ing *ingestRun
		mode := "-"
		var io0 direct.IOStats // before the ingest: its I/O, as a service sees it
		var spin *spinner
		switch phase {
		case alone:
		case busyCPU:
			spin = startSpinner()
		default:
			io0 = direct.Stats()
			ing, err = startIngest(work, phase, m.ingest)
			var un unavailable
			if errors.As(err, &un) {
				emit(pressureMsg{Skip: phase, Why: string(un)})
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %w", phase, err)
			}
			mode = ing.mode
			if m.lead > 0 {
				emit(pressureMsg{Phase: label, Step: "ingesting ahead"})
				time.Sleep(m.lead)
			}
		}
		emit(pressureMsg{Phase: label, Step: "measuring"})
		// The least of the hot file the page cache held, sampled once
		// a second and at the end: what the ingest took from the
		// co-tenant.
		minRes := 1.0
		sample := func() {
			if f, err := res.Fraction(); err == nil {
				minRes = min(minRes, f)
			}
		}
		cpu0, _ := readCPUTimes() // zero where /proc/stat cannot be read: no steal reported
		h, reads, err := runCotenant(m.hotPath, hot, d, func(s int) {
			sample()
			emit(pressureMsg{Phase: label, Step: "measuring", Elapsed: s})
		})
		sample()
		cpu1, _ := readCPUTimes()
		if spin != nil {
			spin.stop()
		}
		var st ingestStats
		if ing != nil {
			emit(pressureMsg{Phase: label, Step: "closing the ingest"})
			st, err = ing.stop(err)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", phase, err)
		}
		peak, err := cg.Peak()
		if err != nil {
			return err
		}
		row := PressureRow{
			Engine:          phase,
			IngestMiBs:      st.mibs(),
			WriteP99Us:      us(st.hist.Quantile(0.99)),
			WriteMaxUs:      us(st.hist.Max()),
			CotenantReadsS:  reads,
			CotenantP50Us:   us(h.Quantile(0.50)),
			CotenantP99Us:   us(h.Quantile(0.99)),
			CotenantP999Us:  us(h.Quantile(0.999)),
			MemoryPeakBytes: peak,
			CPUStealPct:     cpu1.stealPct(cpu0),
		}
		if ing != nil {
			row.ioFigures(direct.Stats().Sub(io0))
		}
		if err := emit(pressureMsg{Row: &row, Detail: &rowDetail{CotenantMaxUs: us(h.Max()), HotCached: minRes, Mode: mode, Hist: h.Points()}}); err != nil {
			return err
		}
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ioFigures sets r's device figures from d, direct.Stats's difference
// around the ingest: the co-tenant reads with os.File, outside dio, so
// d is the ingest's alone.
func (r *PressureRow) ioFigures(d direct.IOStats) {
	if d.Write.Asked > 0 {
		r.WriteAmp = float64(d.Write.Bytes) / float64(d.Write.Asked)
	}
	if d.Write.Latency.Count() > 0 {
		r.DeviceWriteP99Us = us(d.Write.Latency.Quantile(0.99))
	}
	if d.Sync.Latency.Count() > 0 {
		r.SyncP99Us = us(d.Sync.Latency.Quantile(0.99))
	}
}

// unavailable is why an engine cannot run in this directory.
type unavailable string

func (u unavailable) Error() string { return string(u) }

// warm reads the hot file through, which brings back what the last phase
// made the kernel evict.
func warm(f *os.File, size int64) error {
	buf := make([]byte, hotChunk)
	for off := int64(0); off < size; off += hotChunk {
		if _, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off); err != nil {
			return err
		}
	}
	return nil
}

// cotenantCmd is the hidden subcommand the measuring process runs the
// co-tenant as, once a phase: a process of its own in the cgroup, as a
// neighbour is. As a goroutine of the measuring process it shared Go's
// scheduler with the ingest's goroutines, which cost it more than the
// ingest did: 0.72x its reads/s alone beside a direct ingest of about 1
// GiB/s, against 0.94x as a process of its own, with the CPUs idle 60% of
// the time in the first case (a throwaway harness, 3 rounds of 4 s each
// way, 2026-12-03).
const cotenantCmd = "__pressure-cotenant"

// cotenantMsg is a line the co-tenant process prints: each whole second
// measured, then the result.
type cotenantMsg struct {
	Elapsed int                 `json:"elapsed,omitempty"`
	ReadsS  float64             `json:"reads_s,omitempty"`
	Hist    *benchkit.Histogram `json:"hist,omitempty"`
}

// pressureCotenant is the co-tenant process: it reads the hot file at
// random for -seconds, printing a cotenantMsg each second and one with
// what it measured.
func pressureCotenant(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet(cotenantCmd, flag.ContinueOnError)
	hot := fs.Int64("hot", 0, "hot file bytes")
	seconds := fs.Int("seconds", 0, "seconds to read")
	if err := fs.Parse(args); err != nil {
		return usageError{msg: err.Error()}
	}
	if fs.NArg() != 1 || *hot < readSize || *seconds < 1 {
		return usageError{msg: cotenantCmd + " is run by dio-check pressure"}
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(stdout)
	h, reads, err := cotenant(f, *hot, time.Duration(*seconds)*time.Second, func(s int) {
		enc.Encode(cotenantMsg{Elapsed: s})
	})
	if err != nil {
		return err
	}
	return enc.Encode(cotenantMsg{ReadsS: reads, Hist: h})
}

// runCotenant runs the co-tenant process over the hot file at path, of
// size bytes, for d (whole seconds), calls tick after each second it
// reports, and returns its latencies and reads per second.
func runCotenant(path string, size int64, d time.Duration, tick func(seconds int)) (*benchkit.Histogram, float64, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.Command(exe, cotenantCmd, "-hot", strconv.FormatInt(size, 10), "-seconds", strconv.Itoa(int(d/time.Second)), path)
	cmd.Stderr = os.Stderr
	cotenantAttrs(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	var res cotenantMsg
	dec := json.NewDecoder(out)
	var derr error
	for {
		var m cotenantMsg
		if err := dec.Decode(&m); err != nil {
			if !errors.Is(err, io.EOF) {
				derr = err
			}
			break
		}
		switch {
		case m.Hist != nil:
			res = m
		case m.Elapsed > 0:
			tick(m.Elapsed)
		}
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return nil, 0, fmt.Errorf("the co-tenant: %w", err)
	}
	switch {
	case derr != nil:
		return nil, 0, fmt.Errorf("reading the co-tenant: %w", derr)
	case res.Hist == nil:
		return nil, 0, errors.New("the co-tenant reported nothing")
	}
	return res.Hist, res.ReadsS, nil
}

// cotenant reads f at random, 4 KiB at a time, for d, timing each read,
// and calls tick after each whole second. It returns the latencies and
// the reads per second.
func cotenant(f *os.File, size int64, d time.Duration, tick func(seconds int)) (*benchkit.Histogram, float64, error) {
	pages := size / readSize
	rng := mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	buf := make([]byte, readSize)
	h := new(benchkit.Histogram)
	start := time.Now()
	next := 1
	for {
		off := rng.Int64N(pages) * readSize
		t0 := time.Now()
		if _, err := f.ReadAt(buf, off); err != nil {
			return nil, 0, err
		}
		t1 := time.Now()
		h.Record(t1.Sub(t0))
		el := t1.Sub(start)
		if el >= d {
			return h, float64(h.Count()) / el.Seconds(), nil
		}
		if el >= time.Duration(next)*time.Second {
			tick(next)
			next++
		}
	}
}

// spinner keeps one CPU busy until stopped: the busyCPU row's neighbour.
type spinner struct {
	quit atomic.Bool
	done chan struct{}
	sum  uint64 // the arithmetic's result, so that it is not optimised away
}

func startSpinner() *spinner {
	s := &spinner{done: make(chan struct{})}
	go func() {
		// A thread of its own, like a neighbouring process: the Go
		// scheduler could otherwise run it on the co-tenant's P.
		runtime.LockOSThread()
		defer close(s.done)
		x := uint64(1)
		for !s.quit.Load() {
			for range 1 << 12 {
				x = x*6364136223846793005 + 1442695040888963407 // registers only
			}
		}
		s.sum = x
	}()
	return s
}

func (s *spinner) stop() {
	s.quit.Store(true)
	<-s.done
}
