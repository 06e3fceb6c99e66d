//go:build unix

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/dio-storage/dio/internal/benchkit"
	"github.com/dio-storage/dio/internal/cgroup"
)

// The pressure subcommand: Pebble ingesting beside a page-cache co-tenant
// in the same memory cgroup, the case issue 23 measured on vfs.Default
// (the co-tenant cut to 0.34x its reads/s, its p99 37x).
//
//	pebble-bench pressure [-fs default,pebblefs] [-memory 1GiB] [-hot 600MiB]
//	    [-cache 64MiB] [-seconds 20] [-lead 5] [-rounds 3] [-procs N]
//	    [-value 1024] [-batch 100] [-json] DIR
//
// In one memory cgroup a co-tenant (fio: psync 4 KiB random reads of a
// file warmed into the page cache inside the cgroup, one job) is measured
// alone, then beside Pebble ingesting on each engine (batches of -batch
// values, pebble.NoSync, keys hashed over the key space so that
// compactions run), Pebble started -lead seconds before the measurement.
// Each round measures alone and every engine once, the engines' order
// reversed every other round; the table shows medians. The reference
// engine default-unlimited is Pebble on vfs.Default with the cgroup's
// limit lifted while it runs: what the ingest costs the co-tenant in CPU
// and device time alone, without memory pressure.
//
// Needs root (the cgroup) and fio. Everything it makes (the cgroup, the
// hot file, the stores) is removed at the end, and on SIGINT or SIGTERM.

const (
	ingestEnv      = "PEBBLE_BENCH_INGEST" // the engine an ingest child runs
	pressureAlone  = "alone"
	unlimitedLimit = "default-unlimited"
)

type pressureConfig struct {
	engines               []string
	memory, hot, cache    int64
	seconds, lead, rounds int
	procs, value, batch   int
	json                  bool
	dir                   string
	fio                   string // the fio binary
}

func parsePressure(args []string) (pressureConfig, error) {
	c := pressureConfig{fio: "fio"}
	fs := flag.NewFlagSet("pebble-bench pressure", flag.ContinueOnError)
	engines := fs.String("fs", "default,pebblefs", "engines beside the co-tenant: default, pebblefs, pebblefs-stdfs, "+unlimitedLimit+" (vfs.Default with no memory limit, for reference)")
	memory := fs.String("memory", "1GiB", "the memory cgroup's limit, shared by the co-tenant and Pebble")
	hot := fs.String("hot", "600MiB", "the co-tenant's file, warmed into the page cache inside the cgroup")
	cache := fs.String("cache", "64MiB", "Pebble's block cache")
	fs.IntVar(&c.seconds, "seconds", 20, "seconds the co-tenant is measured, alone and beside each engine")
	fs.IntVar(&c.lead, "lead", 5, "seconds Pebble ingests before the co-tenant is measured")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds, each measuring alone and every engine once (the engines' order reversed every other round); the table shows medians")
	fs.IntVar(&c.procs, "procs", max(1, runtime.NumCPU()-1), "GOMAXPROCS of Pebble's process; the default, all CPUs but one, leaves one to the co-tenant's single job")
	fs.IntVar(&c.value, "value", 1024, "value size in bytes")
	fs.IntVar(&c.batch, "batch", 100, "values per batch")
	fs.BoolVar(&c.json, "json", false, "one JSON object per round and phase")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() != 1 {
		return c, fmt.Errorf("pressure: want one DIR, got %d arguments", fs.NArg())
	}
	c.dir = fs.Arg(0)
	for _, v := range []struct {
		name, s string
		dst     *int64
	}{{"-memory", *memory, &c.memory}, {"-hot", *hot, &c.hot}, {"-cache", *cache, &c.cache}} {
		n, err := humanize.ParseBytes(v.s)
		if err != nil {
			return c, fmt.Errorf("pressure: %s: %w", v.name, err)
		}
		*v.dst = int64(n)
	}
	c.engines = strings.Split(*engines, ",")
	for i, e := range c.engines {
		switch {
		case e != "default" && e != "pebblefs" && e != "pebblefs-stdfs" && e != unlimitedLimit:
			return c, fmt.Errorf("pressure: unknown engine %q", e)
		case slices.Contains(c.engines[:i], e):
			return c, fmt.Errorf("pressure: engine %q given twice", e)
		}
	}
	switch {
	case c.hot <= 0 || c.hot%4096 != 0:
		return c, fmt.Errorf("pressure: -hot %d: want a positive multiple of 4KiB", c.hot)
	case c.hot >= c.memory:
		return c, fmt.Errorf("pressure: -hot must be below -memory, or the co-tenant cannot stay warm")
	case c.seconds < 1, c.rounds < 1, c.procs < 1, c.value < 1, c.batch < 1:
		return c, errors.New("pressure: -seconds, -rounds, -procs, -value and -batch must be at least 1")
	case c.lead < 0:
		return c, errors.New("pressure: -lead must not be negative")
	}
	return c, nil
}

// phaseResult is one measurement of the co-tenant: alone, or beside one
// engine's ingest.
type phaseResult struct {
	Round      int     `json:"round"`
	Engine     string  `json:"engine"` // "alone" or the engine ingesting
	ReadsPerS  float64 `json:"cotenant_reads_s"`
	P50us      float64 `json:"cotenant_p50_us"`
	P99us      float64 `json:"cotenant_p99_us"`
	P999us     float64 `json:"cotenant_p999_us"`
	IngestMiBs float64 `json:"ingest_mib_s"` // keys and values committed while the co-tenant ran
	HotCached  float64 `json:"hot_cached"`   // the hot file's share in the page cache after the measurement
	PeakBytes  int64   `json:"memory_peak_bytes"`
}

// pressureMain runs the pressure subcommand: the parent, until SIGINT or
// SIGTERM, or an ingest child.
func pressureMain(args []string) error {
	c, err := parsePressure(args)
	if err != nil {
		return err
	}
	if engine := os.Getenv(ingestEnv); engine != "" {
		return ingestChild(c, engine)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runPressure(ctx, c, os.Stdout, os.Stderr)
}

// runPressure is the parent: it makes the cgroup, the hot file and the
// work directory, runs the phases, prints, and removes everything, also
// when ctx ends first (its children are killed).
func runPressure(ctx context.Context, c pressureConfig, stdout, stderr io.Writer) (err error) {
	if _, err := exec.LookPath(c.fio); err != nil {
		return fmt.Errorf("pressure needs fio: %w", err)
	}
	name := "pebble-bench-pressure-" + strconv.Itoa(os.Getpid()) + "-" + rand.Text()[:8]
	cg, err := newCgroup(name, c.memory)
	if err != nil {
		return fmt.Errorf("memory cgroup: %w (run as root)", err)
	}
	defer func() {
		if rerr := cg.Remove(); err == nil && rerr != nil {
			err = fmt.Errorf("removing the cgroup: %w", rerr)
		}
	}()
	work, err := os.MkdirTemp(c.dir, ".pebble-bench-pressure-")
	if err != nil {
		return err
	}
	defer func() {
		if rerr := os.RemoveAll(work); err == nil {
			err = rerr
		}
	}()
	hot := filepath.Join(work, "hot")
	fmt.Fprintf(stderr, "pressure: cgroup %s (%s), hot file %s\n", cg.Dir, humanize.IBytes(uint64(c.memory)), humanize.IBytes(uint64(c.hot)))
	if err := writeHot(hot, c.hot); err != nil {
		return err
	}
	var all []phaseResult
	for round := range c.rounds {
		engines := slices.Clone(c.engines)
		if round%2 == 1 {
			slices.Reverse(engines)
		}
		for _, e := range append([]string{pressureAlone}, engines...) {
			r, err := runPhase(ctx, c, cg, work, hot, e, stderr)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted: %w", ctx.Err())
				}
				return fmt.Errorf("round %d, %s: %w", round+1, e, err)
			}
			r.Round = round + 1
			fmt.Fprintf(stderr, "round %d %-17s reads/s %7.0f  p50 %5.1f µs  p99 %6.1f µs  p99.9 %7.1f µs  ingest %5.1f MiB/s  hot cached %3.0f%%  peak %s\n",
				r.Round, r.Engine, r.ReadsPerS, r.P50us, r.P99us, r.P999us, r.IngestMiBs, 100*r.HotCached, humanize.IBytes(uint64(r.PeakBytes)))
			all = append(all, r)
		}
	}
	if c.json {
		enc := json.NewEncoder(stdout)
		for _, r := range all {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	printPressure(stdout, c, all)
	return nil
}

// runPhase warms the hot file in the cgroup, starts the engine's ingest
// (none for alone), measures the co-tenant and stops the ingest.
func runPhase(ctx context.Context, c pressureConfig, cg *cgroup.Cgroup, work, hot, engine string, stderr io.Writer) (r phaseResult, err error) {
	r.Engine = engine
	if engine == unlimitedLimit {
		if err := cg.SetLimit(-1); err != nil {
			return r, err
		}
		// Restored once the ingest has ended (deferred calls run last
		// first) and its store is gone: what it cached goes with it.
		defer func() {
			if lerr := cg.SetLimit(c.memory); err == nil && lerr != nil {
				err = fmt.Errorf("restoring the memory limit: %w", lerr)
			}
		}()
	}
	// Warm: read the whole file in the cgroup, so that what a phase
	// before evicted is back, charged here.
	if _, err := runFio(ctx, c, cg, hot, "--rw=read", "--bs=1m"); err != nil {
		return r, fmt.Errorf("warming the hot file: %w", err)
	}
	cg.ResetPeak() // before Linux 6.12 a v2 peak is the cgroup's whole life's
	var in *ingest
	if engine != pressureAlone {
		var err error
		if in, err = startIngest(ctx, c, cg, work, engine, stderr); err != nil {
			return r, err
		}
		defer in.stop()
		fmt.Fprintf(stderr, "pressure: Pebble on %s ingesting, the co-tenant measured in %d s\n", engine, c.lead)
		select {
		case <-time.After(time.Duration(c.lead) * time.Second):
		case <-ctx.Done():
			return r, ctx.Err()
		}
		if err := in.mark(); err != nil {
			return r, err
		}
	}
	fr, err := runFio(ctx, c, cg, hot, "--rw=randread", "--bs=4k", "--norandommap", "--randrepeat=0",
		"--time_based", fmt.Sprintf("--runtime=%ds", c.seconds))
	if err != nil {
		return r, fmt.Errorf("the co-tenant: %w", err)
	}
	r.ReadsPerS, r.P50us, r.P99us, r.P999us = fr.iops, fr.p50, fr.p99, fr.p999
	if cached, size, err := benchkit.ResidentPath(hot); err == nil && size > 0 {
		r.HotCached = float64(cached) / float64(size)
	}
	r.PeakBytes, _ = cg.Peak()
	if in != nil {
		if err := in.mark(); err != nil {
			return r, err
		}
		r.IngestMiBs = in.rate()
		if err := in.stop(); err != nil {
			return r, err
		}
	}
	return r, nil
}

// fioResult is what the co-tenant reports.
type fioResult struct {
	iops, p50, p99, p999 float64 // reads/s, latencies in µs
}

// runFio runs one fio job on hot inside cg: psync, through the page cache,
// without the invalidation fio does by default (that would empty the
// cache the co-tenant stands for).
func runFio(ctx context.Context, c pressureConfig, cg *cgroup.Cgroup, hot string, args ...string) (fioResult, error) {
	args = append([]string{"--name=cotenant", "--filename=" + hot, "--size=" + strconv.FormatInt(c.hot, 10),
		"--ioengine=psync", "--direct=0", "--invalidate=0", "--numjobs=1"}, args...)
	job, err := benchkit.RunFio(benchkit.FioCmd(ctx, cg.Procs(), args...), nil)
	if err != nil {
		return fioResult{}, err
	}
	return cotenantResult(job), nil
}

// parseFio reads fio's JSON output: the first job's read IOPS and
// completion latency percentiles.
func parseFio(out []byte) (fioResult, error) {
	job, err := benchkit.ParseFio(out)
	return cotenantResult(job), err
}

// cotenantResult is what the co-tenant reports of fio's job.
func cotenantResult(job benchkit.FioJob) fioResult {
	us := func(p float64) float64 { return float64(job.Read.Percentile(p)) / 1e3 }
	return fioResult{iops: job.Read.IOPS, p50: us(0.50), p99: us(0.99), p999: us(0.999)}
}

// writeHot writes the co-tenant's file, syncs it and drops it from the
// page cache, so that the warm-up in the cgroup reads it in and the cgroup
// is charged for it.
func writeHot(path string, size int64) error {
	f, err := benchkit.WriteHot(path, size)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return benchkit.DropCache(path)
}

// printPressure prints the medians of every phase over the rounds, each
// against alone's.
func printPressure(w io.Writer, c pressureConfig, all []phaseResult) {
	fmt.Fprintf(w, "co-tenant: fio psync 4 KiB random reads of a warm %s file, one job; Pebble: batches of %d × %d B, NoSync, block cache %s, GOMAXPROCS %d;\n",
		humanize.IBytes(uint64(c.hot)), c.batch, c.value, humanize.IBytes(uint64(c.cache)), c.procs)
	fmt.Fprintf(w, "both in one %s memory cgroup; %d s measured after a %d s lead; medians of %d rounds\n\n",
		humanize.IBytes(uint64(c.memory)), c.seconds, c.lead, c.rounds)
	med := func(e string, f func(phaseResult) float64) float64 {
		var v []float64
		for _, r := range all {
			if r.Engine == e {
				v = append(v, f(r))
			}
		}
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	reads := func(r phaseResult) float64 { return r.ReadsPerS }
	p99 := func(r phaseResult) float64 { return r.P99us }
	p999 := func(r phaseResult) float64 { return r.P999us }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "beside\tingest MiB/s\treads/s\t× alone\tp50 µs\tp99 µs\t× alone\tp99.9 µs\t× alone\thot cached\tmemory peak\t")
	for _, e := range append([]string{pressureAlone}, c.engines...) {
		ingest := "-"
		if e != pressureAlone {
			ingest = fmt.Sprintf("%.1f", med(e, func(r phaseResult) float64 { return r.IngestMiBs }))
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f×\t%.1f\t%.1f\t%.2f×\t%.1f\t%.2f×\t%.0f%%\t%s\t\n", e, ingest,
			med(e, reads), med(e, reads)/med(pressureAlone, reads),
			med(e, func(r phaseResult) float64 { return r.P50us }),
			med(e, p99), med(e, p99)/med(pressureAlone, p99),
			med(e, p999), med(e, p999)/med(pressureAlone, p999),
			100*med(e, func(r phaseResult) float64 { return r.HotCached }),
			humanize.IBytes(uint64(med(e, func(r phaseResult) float64 { return float64(r.PeakBytes) }))))
	}
	tw.Flush()
}

// ingest is a running ingest child.
type ingest struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	marks []ingestMark
	done  bool
}

// ingestMark is the child's answer to a mark: bytes committed so far and
// when.
type ingestMark struct {
	Bytes int64 `json:"bytes"`
	Nanos int64 `json:"ns"`
}

// startIngest starts Pebble ingesting on engine in cg, and waits until
// the store is open.
func startIngest(ctx context.Context, c pressureConfig, cg *cgroup.Cgroup, work, engine string, stderr io.Writer) (*ingest, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fsys := engine
	if engine == unlimitedLimit {
		fsys = "default"
	}
	cmd := exec.CommandContext(ctx, exe, "pressure", "-cache", strconv.FormatInt(c.cache, 10),
		"-value", strconv.Itoa(c.value), "-batch", strconv.Itoa(c.batch), "-procs", strconv.Itoa(c.procs), work)
	cmd.Env = append(os.Environ(), ingestEnv+"="+fsys, cgroupEnv+"="+cg.Ref())
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &ingest{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if !g.out.Scan() || g.out.Text() != "ready" {
		g.stop()
		return nil, fmt.Errorf("the %s ingest did not start", engine)
	}
	return g, nil
}

// mark asks the child how much it has committed.
func (g *ingest) mark() error {
	if _, err := io.WriteString(g.in, "mark\n"); err != nil {
		return err
	}
	if !g.out.Scan() {
		return errors.New("the ingest ended early")
	}
	var m ingestMark
	if err := json.Unmarshal(g.out.Bytes(), &m); err != nil {
		return err
	}
	g.marks = append(g.marks, m)
	return nil
}

// rate is MiB/s committed between the first and the last mark.
func (g *ingest) rate() float64 {
	if len(g.marks) < 2 {
		return 0
	}
	a, b := g.marks[0], g.marks[len(g.marks)-1]
	return float64(b.Bytes-a.Bytes) / (1 << 20) / (float64(b.Nanos-a.Nanos) / 1e9)
}

// stop ends the ingest: the child closes the store, removes it and exits
// once its stdin closes. It is idempotent.
func (g *ingest) stop() error {
	if g.done {
		return nil
	}
	g.done = true
	g.in.Close()
	return g.cmd.Wait()
}
