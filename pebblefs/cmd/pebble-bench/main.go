//go:build unix

// Command pebble-bench runs YCSB-style workloads on Pebble over
// vfs.Default and over pebblefs, each engine in a memory cgroup of the
// same size, so that Pebble's block cache, its heap and (on vfs.Default)
// the page cache share one budget, as they would in a container.
//
//	pebble-bench [-fs default,pebblefs] [-records 1000000] [-ops 200000]
//	    [-workloads load,a,b,c,e] [-threads 4] [-value 1024]
//	    [-cache 256MiB] [-pebblefs-cache SIZE] [-memory 1GiB] [-readahead SIZE]
//	    [-buffers N] [-pool SIZE] [-memtable SIZE] [-go-limit=false] [-malloc-arenas N] [-json] [-metrics] DIR
//
// The workloads are YCSB's core ones: load (insert every record, keys
// hashed over the key space), A (50% reads, 50% updates), B (95/5), C
// (reads only) and E (95% scans of 1 to 100 records, 5% inserts); reads,
// updates and scan starts pick records with YCSB's scrambled zipfian
// distribution (constant 0.99). Writes use pebble.NoSync, as YCSB's
// Pebble and RocksDB bindings do. For each engine and workload it
// reports ops/s, p50 and p99 latency, the cgroup's memory peak and the
// page cache charged to it at the end.
//
// Each engine runs in a child process (this program again) that joins a
// new memory cgroup below this process's own; the cgroup is removed when
// the child ends, and a signal ends the child first. Needs root for the
// cgroup; -memory 0 runs without one. Each workload also reports the time
// Pebble stalled writes and the CPU its process used; -metrics prints
// Pebble's own metrics, what its flushes and compactions took, the
// workload's block-cache hits and misses per operation, the reads per
// operation the disk holding DIR completed (/proc/diskstats) and, for
// pebblefs, what fresh files served and its device reads. In a
// cgroup each child sets the Go runtime's soft memory limit to
// pebblefs.GoMemoryLimit (the cgroup's limit less the block cache, the
// memtables and pebblefs's budgets), as a program running Pebble in a
// container should (-go-limit=false: GOGC alone), and caps glibc's
// malloc arenas, where Pebble's C memory lives (-malloc-arenas 2; 0:
// glibc's default).
// PEBBLE_BENCH_MEMSTATS=1 prints where each child's memory is.
//
// "pebble-bench pressure" measures a page-cache co-tenant (fio) in one
// memory cgroup with Pebble ingesting, on each engine (see pressure.go).
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/cgroup"
	"github.com/dio-storage/dio/pebblefs"
	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"
)

// arenaEnv caps glibc malloc's arenas, where Pebble's block cache and
// memtables live (cgo's calloc): by default a process gets up to eight
// per CPU, each keeping freed memory. In the issue 31 setup (2,000,000
// records, 256 MiB cgroup, 128 MiB block cache) pebblefs was OOM-killed
// in E with 91 MiB of anonymous memory that was neither Go's nor
// Pebble's allocations (pebblefs's budgets counted 15), and ran with
// at most 30 MiB of it with two arenas (pebblefs/README.md). A child in a
// cgroup gets -malloc-arenas (2; 0: glibc's default) unless the
// environment sets it, as a program running Pebble in a container should.
const arenaEnv = "MALLOC_ARENA_MAX"

const (
	childEnv  = "PEBBLE_BENCH_CHILD"  // the engine a child runs
	cgroupEnv = "PEBBLE_BENCH_CGROUP" // the cgroup it joins: "v1:DIR" or "v2:DIR"
)

type config struct {
	engines, workloads []string
	records, ops       int
	threads, value     int
	cache, memory      int64
	pebblefsCache      int64
	readAhead, buffers int   // pebblefs.Options' (0: its defaults)
	pool               int64 // pebblefs's shared buffer budget (0: none)
	memtable           int64 // Pebble's MemTableSize (0: its default, 4 MiB)
	fresh, fsMemory    int64 // pebblefs.Options' FreshFiles and Memory (0: its defaults; fresh < 0: none)
	json               bool
	metrics            bool
	goLimit            bool // set the Go runtime's soft memory limit (pebblefs.GoMemoryLimit)
	arenas             int  // MALLOC_ARENA_MAX for a child in a cgroup (0: glibc's default)
	dir                string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "oneliner" {
		if err := onelinerMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "pebble-bench:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "pressure" {
		if err := pressureMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "pebble-bench:", err)
			os.Exit(1)
		}
		return
	}
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pebble-bench:", err)
		os.Exit(2)
	}
	if engine := os.Getenv(childEnv); engine != "" {
		if err := child(c, engine); err != nil {
			fmt.Fprintln(os.Stderr, "pebble-bench:", engine+":", err)
			os.Exit(1)
		}
		return
	}
	if err := parent(c); err != nil {
		fmt.Fprintln(os.Stderr, "pebble-bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("pebble-bench", flag.ContinueOnError)
	engines := fs.String("fs", "default,pebblefs", "engines: default (vfs.Default), pebblefs, pebblefs-stdfs (pebblefs through the page cache)")
	wl := fs.String("workloads", "load,a,b,c,e", "workloads, in order (load first: the others read what it wrote)")
	fs.IntVar(&c.records, "records", 1_000_000, "records the load phase inserts")
	fs.IntVar(&c.ops, "ops", 200_000, "operations per workload after the load")
	fs.IntVar(&c.threads, "threads", 4, "client goroutines")
	fs.IntVar(&c.value, "value", 1024, "value size in bytes")
	cache := fs.String("cache", "256MiB", "Pebble's block cache")
	pcache := fs.String("pebblefs-cache", "", "pebblefs's block cache (default: -cache), to give it the memory vfs.Default spends on the page cache")
	memory := fs.String("memory", "1GiB", "memory cgroup limit per engine (0: no cgroup)")
	readAhead := fs.String("readahead", "0", "pebblefs's read-ahead for compactions (0: its default, 2MiB)")
	memtable := fs.String("memtable", "0", "Pebble's memtable size, both engines (0: Pebble's default, 4MiB; CockroachDB uses 64MiB)")
	fs.IntVar(&c.buffers, "buffers", 0, "pebblefs's buffers per file written (0: fileio's default)")
	pool := fs.String("pool", "0", "a budget of aligned buffers every pebblefs file written shares and reuses (0: each file maps its own)")
	fresh := fs.String("fresh", "", "pebblefs's fresh-file budget, Options.FreshFiles (default: its own, a sixteenth of the memory limit; 0: none)")
	fsMemory := fs.String("fs-memory", "0", "pebblefs's budget for file buffers and read-ahead, Options.Memory (0: its default, 16MiB)")
	fs.BoolVar(&c.json, "json", false, "one JSON object per engine and workload")
	fs.BoolVar(&c.metrics, "metrics", false, "print Pebble's metrics, block-cache hits and misses and device reads per op to stderr after each workload")
	fs.BoolVar(&c.goLimit, "go-limit", true, "give each engine's Go runtime the soft memory limit pebblefs.GoMemoryLimit computes from the cgroup, the block cache, the memtables and pebblefs's budgets (false: GOGC alone)")
	fs.IntVar(&c.arenas, "malloc-arenas", 2, "MALLOC_ARENA_MAX for each engine in a cgroup: glibc's arenas hold Pebble's C memory and keep what it frees (0: glibc's default, eight per CPU)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() != 1 {
		return c, fmt.Errorf("want one DIR, got %d arguments", fs.NArg())
	}
	c.dir = fs.Arg(0)
	c.engines = strings.Split(*engines, ",")
	c.workloads = strings.Split(*wl, ",")
	for _, e := range c.engines {
		if e != "default" && e != "pebblefs" && e != "pebblefs-stdfs" {
			return c, fmt.Errorf("unknown engine %q", e)
		}
	}
	for _, w := range c.workloads {
		if _, ok := workloads[w]; !ok {
			return c, fmt.Errorf("unknown workload %q", w)
		}
	}
	for _, v := range []struct {
		s   string
		dst *int64
	}{{*cache, &c.cache}, {*memory, &c.memory}, {cmp.Or(*pcache, *cache), &c.pebblefsCache}} {
		n, err := humanize.ParseBytes(v.s)
		if err != nil {
			return c, err
		}
		*v.dst = int64(n)
	}
	ra, err := humanize.ParseBytes(*readAhead)
	if err != nil {
		return c, err
	}
	c.readAhead = int(ra)
	pl, err := humanize.ParseBytes(*pool)
	if err != nil {
		return c, err
	}
	c.pool = int64(pl)
	mt, err := humanize.ParseBytes(*memtable)
	if err != nil {
		return c, err
	}
	c.memtable = int64(mt)
	if *fresh != "" {
		n, err := humanize.ParseBytes(*fresh)
		if err != nil {
			return c, err
		}
		c.fresh = int64(n)
		if n == 0 {
			c.fresh = -1
		}
	}
	fm, err := humanize.ParseBytes(*fsMemory)
	if err != nil {
		return c, err
	}
	c.fsMemory = int64(fm)
	return c, nil
}

// parent runs each engine in a child and prints what they report.
func parent(c config) error {
	var all []result
	for _, engine := range c.engines {
		rs, err := runChild(c, engine)
		all = append(all, rs...)
		if err != nil {
			return err
		}
	}
	if c.json {
		enc := json.NewEncoder(os.Stdout)
		for _, r := range all {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	printTable(c, all)
	return nil
}

func runChild(c config, engine string) ([]result, error) {
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"="+engine)
	cmd.Stderr = os.Stderr
	if c.memory > 0 {
		cg, err := newCgroup(fmt.Sprintf("pebble-bench-%d-%s", os.Getpid(), engine), c.memory)
		if err != nil {
			return nil, fmt.Errorf("memory cgroup: %w (run as root, or -memory 0)", err)
		}
		defer cg.Remove()
		cmd.Env = append(cmd.Env, cgroupEnv+"="+cg.Ref())
		if c.arenas > 0 && os.Getenv(arenaEnv) == "" {
			cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", arenaEnv, c.arenas))
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			_ = cmd.Process.Kill()
		}
	}()
	var rs []result
	s := bufio.NewScanner(out)
	for s.Scan() {
		var r result
		if err := json.Unmarshal(s.Bytes(), &r); err != nil {
			return rs, fmt.Errorf("%s: %q: %w", engine, s.Text(), err)
		}
		rs = append(rs, r)
		if !c.json {
			fmt.Fprintf(os.Stderr, "%-8s %-4s %10.0f ops/s  p50 %7.1f µs  p99 %8.1f µs  p99.9 %8.1f µs  peak %s  page cache %s  stalled %.1f s  cpu %.1f µs/op  device %.0f/%.0f B/op read/written\n",
				r.FS, r.Workload, r.OpsPerSec, r.P50us, r.P99us, r.P999us, humanize.IBytes(uint64(r.PeakBytes)), humanize.IBytes(uint64(r.PageCacheBytes)), r.StallSeconds, r.CPUus, r.DeviceReadB, r.DeviceWriteB)
		}
	}
	if err := cmd.Wait(); err != nil {
		return rs, fmt.Errorf("%s: %w", engine, err)
	}
	return rs, nil
}

func printTable(c config, all []result) {
	fmt.Printf("%d records of %d B, %d ops per workload, %d threads, block cache %s (pebblefs %s), memory %s\n\n",
		c.records, c.value, c.ops, c.threads, humanize.IBytes(uint64(c.cache)), humanize.IBytes(uint64(c.pebblefsCache)), humanize.IBytes(uint64(c.memory)))
	by := map[string]result{}
	for _, r := range all {
		by[r.FS+"/"+r.Workload] = r
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tfs\tops/s\tp50 µs\tp99 µs\tmemory peak\tpage cache\tops/s vs default\t")
	for _, w := range c.workloads {
		for _, e := range c.engines {
			r, ok := by[e+"/"+w]
			if !ok {
				continue
			}
			ratio := ""
			if d, ok := by["default/"+w]; ok && e != "default" && d.OpsPerSec > 0 {
				ratio = fmt.Sprintf("%.2f×", r.OpsPerSec/d.OpsPerSec)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.1f\t%s\t%s\t%s\t\n", w, e, r.OpsPerSec, r.P50us, r.P99us,
				humanize.IBytes(uint64(r.PeakBytes)), humanize.IBytes(uint64(r.PageCacheBytes)), ratio)
		}
	}
	tw.Flush()
}

// child runs the workloads on one engine, in its cgroup, and prints one
// JSON result per workload.
func child(c config, engine string) error {
	cg, err := joinCgroup()
	if err != nil {
		return err
	}
	dir := filepath.Join(c.dir, engine)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	po := pebblefs.Options{ReadAhead: c.readAhead, Buffers: c.buffers, FreshFiles: c.fresh, Memory: c.fsMemory}
	if c.pool > 0 {
		p, err := aligned.NewPool(64<<10, 4096, int(c.pool))
		if err != nil {
			return err
		}
		defer p.Close()
		po.Pool = p
	}
	fsys := engineFS(engine, po)
	if pfs, ok := fsys.(*pebblefs.FS); ok {
		memHook = func() string {
			m := pfs.Memory()
			return fmt.Sprintf("pebblefs: buffers %d, read-ahead %d, fresh %d of %d MiB (%d MiB given way, watcher woken %d times), read-ahead denied %d",
				m.Buffers>>20, m.ReadAhead>>20, m.Fresh>>20, m.FreshLimit>>20, m.FreshGaveWay>>20, m.FreshWoken, m.ReadAheadDenied)
		}
	}
	size := c.cache
	if engine != "default" {
		size = c.pebblefsCache
	}
	cache := pebble.NewCache(size)
	defer cache.Unref()
	var stalls stallClock
	opts := &pebble.Options{FS: fsys, Cache: cache, Logger: quiet{}, EventListener: stalls.listener(), MemTableSize: uint64(c.memtable)}
	if c.goLimit && cg != nil {
		lim := pebblefs.GoMemoryLimit(fsys, opts)
		debug.SetMemoryLimit(lim)
		if os.Getenv(memStatsEnv) != "" {
			fmt.Fprintf(os.Stderr, "memstats: Go memory limit %d MiB\n", lim>>20)
		}
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	defer startMemStats(db)()
	b := &bench{db: db, threads: c.threads, value: c.value, records: uint64(c.records)}
	b.next.Store(0)
	b.zipf = newZipf(b.records)
	enc := json.NewEncoder(os.Stdout)
	for _, w := range c.workloads {
		if cg != nil {
			cg.ResetPeak() // before Linux 6.12 a v2 peak is the cgroup's whole life's
		}
		stalls.reset()
		fs0, _ := pebblefs.StatsOf(fsys)
		bc0 := db.Metrics().BlockCache
		disk0 := diskReadsOf(dir)
		cpu0 := cpuTime()
		io0 := processIO()
		ops := c.ops
		if w == "load" {
			ops = c.records
		}
		stopProfile := startProfile(w)
		r, err := b.run(w, ops)
		stopProfile()
		if err != nil {
			db.Close()
			return err
		}
		if w == "load" {
			b.records = b.next.Load()
			b.zipf = newZipf(b.records)
		}
		r.FS = engine
		r.StallSeconds = stalls.total().Seconds()
		r.CPUSeconds = (cpuTime() - cpu0).Seconds()
		io1 := processIO()
		if r.Ops > 0 {
			r.CPUus = r.CPUSeconds * 1e6 / float64(r.Ops)
			r.DeviceReadB = float64(io1.read-io0.read) / float64(r.Ops)
			r.DeviceWriteB = float64(io1.write-io0.write) / float64(r.Ops)
		}
		if cg != nil {
			r.PeakBytes, _ = cg.Peak()
			r.PageCacheBytes, _ = cg.PageCache()
		}
		if c.metrics {
			m := db.Metrics()
			fmt.Fprintf(os.Stderr, "%s %s: %v\n%s\n", engine, w, &stalls, m)
			if r.Ops > 0 {
				hits, misses := m.BlockCache.Hits-bc0.Hits, m.BlockCache.Misses-bc0.Misses
				fmt.Fprintf(os.Stderr, "%s %s: block cache %.2f hits, %.2f misses per op (hit rate %.1f%%, this workload's)\n",
					engine, w, float64(hits)/float64(r.Ops), float64(misses)/float64(r.Ops), 100*float64(hits)/float64(max(hits+misses, 1)))
			}
			if d := diskReadsOf(dir).sub(disk0); d.reads > 0 && r.Ops > 0 {
				fmt.Fprintf(os.Stderr, "%s %s: the disk (/proc/diskstats, every process's) completed %.2f reads/op of %d B each, %.1f µs waited each\n",
					engine, w, float64(d.reads)/float64(r.Ops), d.sectors*512/d.reads, float64(d.ms)*1000/float64(d.reads))
			}
			if fs1, ok := pebblefs.StatsOf(fsys); ok && r.Ops > 0 {
				d := fs1.Sub(fs0)
				fmt.Fprintf(os.Stderr, "%s %s: fresh files served %d B/op (%d reads); the device read %d B/op for pebblefs's files in %.2f reads/op of %d B asked each\n",
					engine, w, d.FreshBytes/uint64(r.Ops), d.FreshReads, d.Read.DeviceBytes/uint64(r.Ops),
					float64(d.Read.Reads)/float64(r.Ops), d.Read.Bytes/max(d.Read.Reads, 1))
			}
			if f := memHook; f != nil {
				fmt.Fprintf(os.Stderr, "%s %s: %s\n", engine, w, f())
			}
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return db.Close()
}

// newCgroup makes a memory cgroup below this process's own, limited to
// limit bytes.
func newCgroup(name string, limit int64) (*cgroup.Cgroup, error) {
	roots, err := cgroup.Discover()
	if err != nil {
		return nil, err
	}
	return cgroup.New(cgroup.OS{}, roots, name, limit)
}

// joinCgroup moves this process into the cgroup cgroupEnv names, if any,
// and returns it.
func joinCgroup() (*cgroup.Cgroup, error) {
	ref := os.Getenv(cgroupEnv)
	if ref == "" {
		return nil, nil
	}
	cg, err := cgroup.OpenRef(cgroup.OS{}, ref)
	if err == nil {
		err = cg.Join(os.Getpid())
	}
	if err != nil {
		return nil, fmt.Errorf("joining %s: %w", ref, err)
	}
	return cg, nil
}

// engineFS returns the vfs.FS an engine names, pebblefs's with o.
func engineFS(engine string, o pebblefs.Options) vfs.FS {
	switch engine {
	case "pebblefs":
		return pebblefs.New(&o)
	case "pebblefs-stdfs":
		o.IO = fallback.StdFS
		return pebblefs.New(&o)
	}
	return vfs.Default
}

// quiet drops Pebble's log lines: the results go to stdout.
type quiet struct{}

func (quiet) Infof(string, ...any)         {}
func (quiet) Errorf(f string, args ...any) { fmt.Fprintf(os.Stderr, f+"\n", args...) }
func (quiet) Fatalf(f string, args ...any) {
	fmt.Fprintf(os.Stderr, f+"\n", args...)
	os.Exit(1)
}

// cpuTime returns the CPU time this process has used, user and system,
// its io_uring workers' included (they are its threads).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profileEnv names a directory where each workload's CPU profile is
// written, ENGINE-WORKLOAD.pprof, for finding where an engine's CPU goes.
const profileEnv = "PEBBLE_BENCH_CPUPROFILE"

// startProfile starts workload w's CPU profile when profileEnv is set and
// returns what stops it.
func startProfile(w string) func() {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, os.Getenv(childEnv)+"-"+w+".pprof"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "pebble-bench: profile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		fmt.Fprintln(os.Stderr, "pebble-bench: profile:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// ioBytes is what /proc/self/io counts this process (its threads, the
// io_uring workers among them) reading from and writing to storage:
// O_DIRECT and page-cache misses alike, writes as they dirty pages.
type ioBytes struct{ read, write int64 }

func processIO() ioBytes {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return ioBytes{}
	}
	var b ioBytes
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "read_bytes":
			b.read = n
		case "write_bytes":
			b.write = n
		}
	}
	return b
}

// diskReads is what /proc/diskstats counts for one block device: reads
// completed, 512-byte sectors read, milliseconds spent reading.
type diskReads struct{ reads, sectors, ms uint64 }

func (d diskReads) sub(prev diskReads) diskReads {
	return diskReads{d.reads - prev.reads, d.sectors - prev.sectors, d.ms - prev.ms}
}

// diskReadsOf returns the counts of the device that holds dir, or zero
// when /proc/diskstats does not list it (tmpfs, no /proc).
func diskReadsOf(dir string) diskReads {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return diskReads{}
	}
	dev := uint64(st.Dev) // int32 on darwin
	major, minor := uint64(unix.Major(dev)), uint64(unix.Minor(dev))
	data, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return diskReads{}
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 {
			continue
		}
		if f[0] != strconv.FormatUint(major, 10) || f[1] != strconv.FormatUint(minor, 10) {
			continue
		}
		var d diskReads
		d.reads, _ = strconv.ParseUint(f[3], 10, 64)
		d.sectors, _ = strconv.ParseUint(f[5], 10, 64)
		d.ms, _ = strconv.ParseUint(f[6], 10, 64)
		return d
	}
	return diskReads{}
}
