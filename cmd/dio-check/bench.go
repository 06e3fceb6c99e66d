package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dio-storage/dio/cmd/dio-check/internal/ingest"
	"github.com/dio-storage/dio/direct"
)

// BenchResult is one run; -json prints one per line.
type BenchResult struct {
	Workload       string  `json:"workload"`
	ValueSize      int     `json:"value_size"`
	Bytes          int64   `json:"bytes"`
	Buffer         int     `json:"buffer"`
	Engine         string  `json:"engine"`
	Run            int     `json:"run"`
	MiBs           float64 `json:"mib_s"`
	PageCacheBytes int64   `json:"page_cache_bytes"`
	OutputBytes    int64   `json:"output_bytes"`
	ElapsedMs      float64 `json:"elapsed_ms"`

	// The read workload's rows also say who read (ingest.ReadBlob,
	// ingest.ReadBlobs, ingest.Pread or "fio randread"), from how many
	// goroutines (fio: its queue depth), in batches of how many offsets
	// (ReadBlobs), and how many reads per second.
	Reader  string  `json:"reader,omitempty"`
	Readers int     `json:"readers,omitempty"`
	Batch   int     `json:"batch,omitempty"`
	Reads   int64   `json:"reads,omitempty"`
	ReadsS  float64 `json:"reads_s,omitempty"`

	// CPUUsPerOp is the CPU time the whole process used per operation,
	// in µs (user and system, every thread, io_uring's io-wq workers
	// included; fio's rows count fio's process the same way, as our
	// child): per read, and for the write workloads per buffer written
	// (fio: per bs request), so that the rows compare. Absent where
	// it cannot be read.
	CPUUsPerOp float64 `json:"cpu_us_per_op,omitempty"`

	// Device is set when the directory is on a RAM-backed block device
	// (see ramDevice), where CPU rather than a disk sets the pace.
	Device string `json:"device,omitempty"`

	// What direct.Stats saw of the run (its difference around it), as a
	// service would see it: the device's bytes over the bytes dio's
	// writers and readers were asked for (write amplification: padded
	// tails written again; read amplification: reads rounded out to the
	// alignment), and the p99 latency of the device writes, fdatasyncs
	// and reads. Absent for rows that do not go through dio (fio,
	// O_DIRECT pread) and for operations a row did not make.
	WriteAmp   float64 `json:"write_amp,omitempty"`
	WriteP99Us float64 `json:"write_p99_us,omitempty"`
	SyncP99Us  float64 `json:"sync_p99_us,omitempty"`
	ReadAmp    float64 `json:"read_amp,omitempty"`
	ReadP99Us  float64 `json:"read_p99_us,omitempty"`
}

// dioFigures sets r's figures from d, direct.Stats's difference around
// the run.
func (r *BenchResult) dioFigures(d direct.IOStats) {
	p99 := func(o direct.OpStats) float64 {
		if o.Latency.Count() == 0 {
			return 0
		}
		return float64(o.Latency.Quantile(0.99).Nanoseconds()) / 1000
	}
	if d.Write.Asked > 0 {
		r.WriteAmp, r.WriteP99Us = float64(d.Write.Bytes)/float64(d.Write.Asked), p99(d.Write)
		r.SyncP99Us = p99(d.Sync)
	}
	if d.Read.Asked > 0 {
		r.ReadAmp, r.ReadP99Us = float64(d.Read.Bytes)/float64(d.Read.Asked), p99(d.Read)
	}
}

// cpuPerOp returns µs of cpu per one of ops, or 0 when either is unknown.
func cpuPerOp(cpu time.Duration, ops int64) float64 {
	if cpu <= 0 || ops <= 0 {
		return 0
	}
	return float64(cpu.Nanoseconds()) / 1000 / float64(ops)
}

// benchOptions are the bench's flags.
type benchOptions struct {
	json      bool
	size      sizeValue
	workloads string
	duration  time.Duration
	value     sizeValue
	buffers   sizesValue
	runs      int
	depth     int
	fio       bool
}

func benchFlags() (*flag.FlagSet, *benchOptions) {
	o := benchOptions{size: 128 << 20, value: 100, buffers: sizesValue{8 << 10, 64 << 10}}
	fs := flag.NewFlagSet("dio-check bench", flag.ContinueOnError)
	fs.BoolVar(&o.json, "json", false, "print one JSON object per run; a directory the bench cannot use gets {\"dir\", \"error\"}")
	fs.Var(&o.size, "size", "payload `bytes` to ingest per run; the read workload's blob file is "+sizeName(readFileSize)+", or this size when -size is given")
	fs.StringVar(&o.workloads, "workload", strings.Join(append(ingest.Workloads(), ingest.Read), ","), "workloads, comma-separated")
	fs.DurationVar(&o.duration, "duration", time.Second, "how long each read row reads")
	fs.Var(&o.value, "value", "`bytes` per value, 1B to "+sizeName(maxValue))
	fs.Var(&o.buffers, "buffers", "buffer `sizes`, comma-separated, multiples of 512 bytes")
	fs.IntVar(&o.runs, "runs", 1, "rounds; each runs every workload, buffer and engine once, interleaved")
	fs.IntVar(&o.depth, "depth", 0, "buffers per file, filled in ring order and written in merged groups; 0, the default, is blobio's: a 1MiB ring with O_DIRECT (128 of 8KiB, 16 of 64KiB: two merged 512KiB writes), 4 buffers through the page cache")
	fs.BoolVar(&o.fio, "fio", true, "also run fio as reference rows, if it is installed (writes: io_uring, O_DIRECT, QD4, end fsync; reads: randread 4KiB at QD 1, 16, 32)")
	return fs, &o
}

// maxBuffer is the largest of -buffers: each file holds several, from
// memory, and Neon's are 8 KiB and 64 KiB.
const maxBuffer = 1 << 30

// maxValue is the largest -value: a blob of 1 MiB is far past Neon's
// values (100 bytes in bench_ingest) and keeps a run's memory small.
const maxValue = 1 << 20

func runBench(args []string, stdout, stderr io.Writer, tmp *tempFiles) error {
	fs, o := benchFlags()
	dirs, err := parseFlags(fs, args, stdout, func(w io.Writer) { printFlags(w, fs) })
	if err != nil {
		return err
	}
	bad := func(msg string) error { return badUsage(fs, msg) }
	if len(dirs) != 1 {
		return bad("bench takes exactly one directory")
	}
	dir := dirs[0]
	size := int64(o.size)
	var buffers []int
	for _, n := range o.buffers {
		switch {
		case n%direct.MinAlignment != 0:
			return bad(fmt.Sprintf("-buffers: %s (%d bytes) is not a multiple of 512 bytes (KiB is 1024 bytes, kB 1000)", sizeName(n), n))
		case n > maxBuffer:
			return bad(fmt.Sprintf("-buffers: %s is past the largest, %s", sizeName(n), sizeName(maxBuffer)))
		}
		buffers = append(buffers, int(n))
	}
	value := int(o.value)
	if o.value > maxValue || int64(o.value) > size {
		return bad(fmt.Sprintf("-value %s: want 1 byte to %s, at most -size", sizeName(int64(o.value)), sizeName(maxValue)))
	}
	if o.depth < 0 {
		return bad("-depth must not be negative")
	}
	if o.runs < 1 {
		return bad("-runs must be at least 1")
	}
	var workloads []string
	withRead := false
	for _, w := range strings.Split(o.workloads, ",") {
		switch w = strings.TrimSpace(w); {
		case w == ingest.Read:
			withRead = true
		case slices.Contains(ingest.Workloads(), w):
			workloads = append(workloads, w)
		default:
			return bad(fmt.Sprintf("-workload: %q is none of %s, %s", w, strings.Join(ingest.Workloads(), ", "), ingest.Read))
		}
	}
	if o.duration <= 0 {
		return bad("-duration must be positive")
	}
	readSize := int64(readFileSize)
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "size" {
			readSize = size
		}
	})
	// A directory the bench cannot use is an object on stdout under
	// -json, as in the probe.
	if err := checkDir(dir); err != nil {
		return dirError(stdout, o.json, dir, err)
	}
	// Fail early, as a usage error, on a directory we cannot write.
	probePath, err := createTemp(dir, ".dio-check-", tmp)
	if err != nil {
		return dirError(stdout, o.json, dir, err)
	}
	tmp.remove(probePath)

	if o.fio && !haveFio() {
		fmt.Fprintln(stderr, "dio-check: fio not found: no reference row (apt-get install fio)")
		o.fio = false
	}
	progress := newRunProgress(stderr, "dio-check bench", benchPlan(o, workloads, buffers, size, readSize, withRead))
	round := func(run int) string {
		if o.runs == 1 {
			return ""
		}
		return fmt.Sprintf(", round %d/%d", run+1, o.runs)
	}
	var results []BenchResult
	device := ramDevice(dir)
	report := func(r BenchResult) error {
		r.Device = device
		results = append(results, r)
		if o.json {
			// Above the live bar, when stdout is the same terminal.
			return progress.above(func() error { return json.NewEncoder(stdout).Encode(r) })
		}
		return nil
	}
	skipped := map[string]string{}
	rows := ingestRows{o: o, dir: dir, size: size, value: value, progress: progress, round: round, skipped: skipped, tmp: tmp, report: report}
	if err := rows.run(workloads, buffers); err != nil {
		return err
	}
	ingestResults := len(results)
	rb := readBench{dir: dir, size: readSize, runs: o.runs, duration: o.duration, withFio: o.fio,
		tmp: tmp, skipped: skipped, report: report, progress: progress, round: round}
	if withRead {
		if err := rb.run(); err != nil {
			return err
		}
	}
	progress.done()
	for name, why := range skipped {
		fmt.Fprintf(stderr, "dio-check: skipped %s: %s\n", name, why)
	}
	if !o.json {
		if len(workloads) > 0 {
			printBench(stdout, dir, size, value, o.runs, buffers, results[:ingestResults])
		}
		if withRead {
			if len(workloads) > 0 {
				fmt.Fprintln(stdout)
			}
			printReads(stdout, rb, results[ingestResults:])
		}
	}
	return nil
}

// ingestRows are the ingest section of a bench: every workload, buffer
// size and engine, and fio's reference row, round after round.
type ingestRows struct {
	o        *benchOptions
	dir      string
	size     int64
	value    int
	progress *runProgress
	round    func(run int) string // ", round 2/3", or "" for one run
	skipped  map[string]string    // why an engine did not run, by name
	tmp      *tempFiles
	report   func(BenchResult) error
}

// run runs the rows of workloads and buffers.
func (b ingestRows) run(workloads []string, buffers []int) error {
	for run := range b.o.runs {
		for _, w := range workloads {
			for _, buf := range buffers {
				for _, e := range ingest.Engines() {
					if _, ok := b.skipped[e.Name]; ok {
						b.progress.skip(ingestCost(w, b.size))
						continue
					}
					b.progress.step(fmt.Sprintf("%s, %s buffers, %s%s", w, sizeName(int64(buf)), e.Name, b.round(run)), ingestCost(w, b.size))
					c := ingest.Config{Dir: b.dir, Workload: w, Engine: e, Buffer: buf, Buffers: b.o.depth, Value: b.value, Bytes: b.size, Files: b.tmp}
					before := direct.Stats()
					r, err := ingest.Run(c)
					d := direct.Stats().Sub(before)
					if errors.Is(err, ingest.ErrUnavailable) {
						b.skipped[e.Name] = err.Error()
						continue
					}
					if err != nil {
						return fmt.Errorf("%s, %s, %s: %w", w, sizeName(int64(buf)), e.Name, err)
					}
					res := BenchResult{
						Workload: w, ValueSize: b.value, Bytes: b.size, Buffer: buf, Engine: e.Name, Run: run + 1,
						MiBs: r.MiBs(c), PageCacheBytes: r.PageCacheBytes, OutputBytes: r.OutputBytes,
						ElapsedMs:  float64(r.Elapsed.Microseconds()) / 1000,
						CPUUsPerOp: cpuPerOp(r.CPU, (b.size+int64(buf)-1)/int64(buf)),
					}
					res.dioFigures(d)
					if err := b.report(res); err != nil {
						return err
					}
				}
				if _, ok := b.skipped[fioEngine]; b.o.fio && w == ingest.SeqNoDelta {
					if ok {
						b.progress.skip(stepCost{bytes: b.size})
						continue
					}
					b.progress.step(fmt.Sprintf("%s, %s buffers, %s%s", w, sizeName(int64(buf)), fioEngine, b.round(run)), stepCost{bytes: b.size})
					mibs, cpu, err := runFio(b.dir, buf, b.size, b.tmp)
					if err != nil { // such as O_DIRECT refused: the rows above say so
						b.skipped[fioEngine] = err.Error()
						continue
					}
					res := BenchResult{Workload: w, Bytes: b.size, Buffer: buf, Engine: fioEngine, Run: run + 1, MiBs: mibs, OutputBytes: b.size,
						CPUUsPerOp: cpuPerOp(cpu, (b.size+int64(buf)-1)/int64(buf))}
					if err := b.report(res); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// printBench prints the median of each row over the runs, with its ratios
// to std-fs, std-fs+fsync and fio from the same workload and buffer size.
func printBench(w io.Writer, dir string, size int64, value, runs int, buffers []int, results []BenchResult) {
	fsName, _ := direct.Filesystem(dir)
	fmt.Fprintf(w, "dio-check bench: %s of %d-byte values on %s (%s), median of %d run(s)\n", sizeName(size), value, dir, fsName, runs)
	if d := ramDevice(dir); d != "" {
		fmt.Fprintf(w, "(%s)\n", d)
	}
	fmt.Fprintf(w, "(CPU µs/buffer: the whole process's user+system time per buffer of payload; fio's, as our child, per bs request)\n\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tbuffer\tengine\tMiB/s\t× std-fs\t× std-fs+fsync\t× fio\tCPU µs/buffer\t× fio CPU\tpage cache\t")
	cpuMedian := func(wl string, buf int, engine string) float64 {
		var v []float64
		for _, r := range results {
			if r.Workload == wl && r.Buffer == buf && r.Engine == engine && r.CPUUsPerOp > 0 {
				v = append(v, r.CPUUsPerOp)
			}
		}
		return medianOf(v)
	}
	median := func(wl string, buf int, engine string) (float64, int64, bool) {
		var v []float64
		var pc int64
		for _, r := range results {
			if r.Workload == wl && r.Buffer == buf && r.Engine == engine {
				v = append(v, r.MiBs)
				pc = max(pc, r.PageCacheBytes)
			}
		}
		if len(v) == 0 {
			return 0, 0, false
		}
		return medianOf(v), pc, true
	}
	for _, wl := range ingest.Workloads() {
		for _, buf := range buffers {
			base, _, _ := median(wl, buf, "std-fs")
			durable, _, _ := median(wl, buf, "std-fs+fsync")
			ref, _, _ := median(wl, buf, fioEngine)
			refCPU := cpuMedian(wl, buf, fioEngine)
			for _, e := range append(ingest.Engines(), ingest.Engine{Name: fioEngine}) {
				m, pc, ok := median(wl, buf, e.Name)
				if !ok {
					continue
				}
				cached := sizeName(pc)
				if e.Name == fioEngine {
					cached = "-"
				}
				cpu := cpuMedian(wl, buf, e.Name)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", wl, sizeName(int64(buf)), e.Name, m, ratio(m, base), ratio(m, durable), ratio(m, ref),
					cpuCell(cpu), ratio(cpu, refCPU), cached)
			}
		}
	}
	tw.Flush()

	// The same medians in the layout of Neon's bench_ingest table, with
	// io_uring's ratio to std-fs in brackets, to set beside theirs.
	fmt.Fprintf(w, "\nIn Neon's layout (MiB/s; direct+io_uring / std-fs in brackets):\n\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "buffer\tstd-fs seq\tio_uring seq\tstd-fs seq, no delta\tio_uring seq, no delta\t")
	for _, buf := range buffers {
		fmt.Fprintf(tw, "%s\t", sizeName(int64(buf)))
		for _, wl := range []string{ingest.Seq, ingest.SeqNoDelta} {
			base, _, okBase := median(wl, buf, "std-fs")
			m, _, ok := median(wl, buf, "direct+io_uring")
			baseCell, cell := "-", "-"
			if okBase {
				baseCell = fmt.Sprintf("%.0f", base)
			}
			if ok {
				cell = fmt.Sprintf("%.0f (%s)", m, ratio(m, base))
			}
			fmt.Fprintf(tw, "%s\t%s\t", baseCell, cell)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// medianOf returns the median of v, which it sorts, or 0 for none.
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// cpuCell prints µs of CPU per operation, "-" where unknown.
func cpuCell(us float64) string {
	if us <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", us)
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
