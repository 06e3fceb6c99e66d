package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/ingest"
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
}

func runBench(args []string, stdout, stderr io.Writer, tmp *tempFiles) error {
	fs := flag.NewFlagSet("dio-check bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per run")
	sizeFlag := fs.String("size", "128MiB", "payload to ingest per run; for read, the blob file (default "+sizeName(readFileSize)+")")
	workloadFlag := fs.String("workload", strings.Join(append(slices.Clone(ingest.Workloads), ingest.Read), ","), "workloads, comma-separated")
	duration := fs.Duration("duration", time.Second, "how long each read row reads")
	value := fs.Int("value", 100, "bytes per value")
	buffersFlag := fs.String("buffers", "8KiB,64KiB", "buffer sizes, comma-separated")
	runs := fs.Int("runs", 1, "rounds; each runs every workload, buffer and engine once, interleaved")
	depth := fs.Int("depth", 0, "buffers per file, filled in ring order and written in merged groups (0: the default)")
	withFio := fs.Bool("fio", true, "also run fio as reference rows, if it is installed (writes: io_uring, O_DIRECT, QD4, end fsync; reads: randread 4KiB at QD 1, 16, 32)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dio-check bench [-json] [-workload seq-no-delta,seq,read] [-size 128MiB] [-value 100] [-buffers 8KiB,64KiB] [-runs 1] [-depth 0] [-duration 1s] [-fio=true] DIR")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return usageError{"bench takes exactly one directory"}
	}
	dir := fs.Arg(0)
	size, err := parseSize(*sizeFlag)
	if err != nil {
		return usageError{"-size: " + err.Error()}
	}
	var buffers []int
	for _, s := range strings.Split(*buffersFlag, ",") {
		n, err := parseSize(strings.TrimSpace(s))
		if err != nil || n <= 0 || n%512 != 0 {
			return usageError{fmt.Sprintf("-buffers: %q is not a positive multiple of 512 bytes", s)}
		}
		buffers = append(buffers, int(n))
	}
	if *value <= 0 || int64(*value) > size || *value > 1<<20 {
		return usageError{fmt.Sprintf("-value %d: want 1 byte to 1 MiB, at most -size", *value)}
	}
	if *depth < 0 {
		return usageError{"-depth must not be negative"}
	}
	if *runs < 1 {
		return usageError{"-runs must be at least 1"}
	}
	var workloads []string
	withRead := false
	for _, w := range strings.Split(*workloadFlag, ",") {
		switch w = strings.TrimSpace(w); {
		case w == ingest.Read:
			withRead = true
		case slices.Contains(ingest.Workloads, w):
			workloads = append(workloads, w)
		default:
			return usageError{fmt.Sprintf("-workload: %q is none of %s, %s", w, strings.Join(ingest.Workloads, ", "), ingest.Read)}
		}
	}
	if *duration <= 0 {
		return usageError{"-duration must be positive"}
	}
	readSize := int64(readFileSize)
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "size" {
			readSize = size
		}
	})
	if err := checkDir(dir); err != nil {
		return err
	}
	// Fail early, as a usage error, on a directory we cannot write.
	probePath, err := createTemp(dir, ".dio-check-", tmp)
	if err != nil {
		return err
	}
	tmp.remove(probePath)

	if *withFio && !haveFio() {
		fmt.Fprintln(stderr, "dio-check: fio not found: no reference row (apt-get install fio)")
		*withFio = false
	}
	progress := isTerminal(stderr)
	var results []BenchResult
	report := func(r BenchResult) error {
		results = append(results, r)
		if *asJSON {
			return json.NewEncoder(stdout).Encode(r)
		}
		return nil
	}
	skipped := map[string]string{}
	for run := range *runs {
		for _, w := range workloads {
			for _, buf := range buffers {
				for _, e := range ingest.Engines {
					if _, ok := skipped[e.Name]; ok {
						continue
					}
					if progress {
						fmt.Fprintf(stderr, "\r\033[Krun %d/%d: %s, %s buffers, %s", run+1, *runs, w, sizeName(buf), e.Name)
					}
					c := ingest.Config{Dir: dir, Workload: w, Engine: e, Buffer: buf, Buffers: *depth, Value: *value, Bytes: size, Files: tmp}
					r, err := ingest.Run(c)
					if errors.Is(err, ingest.ErrUnavailable) {
						skipped[e.Name] = err.Error()
						continue
					}
					if err != nil {
						return fmt.Errorf("%s, %s, %s: %w", w, sizeName(buf), e.Name, err)
					}
					res := BenchResult{
						Workload: w, ValueSize: *value, Bytes: size, Buffer: buf, Engine: e.Name, Run: run + 1,
						MiBs: r.MiBs(c), PageCacheBytes: r.PageCacheBytes, OutputBytes: r.OutputBytes,
						ElapsedMs: float64(r.Elapsed.Microseconds()) / 1000,
					}
					if err := report(res); err != nil {
						return err
					}
				}
				if _, ok := skipped[fioEngine]; *withFio && !ok && w == ingest.SeqNoDelta {
					mibs, err := runFio(dir, buf, size, tmp)
					if err != nil { // such as O_DIRECT refused: the rows above say so
						skipped[fioEngine] = err.Error()
						continue
					}
					res := BenchResult{Workload: w, Bytes: size, Buffer: buf, Engine: fioEngine, Run: run + 1, MiBs: mibs, OutputBytes: size}
					if err := report(res); err != nil {
						return err
					}
				}
			}
		}
	}
	ingestResults := len(results)
	rb := readBench{dir: dir, size: readSize, runs: *runs, duration: *duration, withFio: *withFio,
		tmp: tmp, skipped: skipped, report: report}
	if progress {
		rb.progress = stderr
	}
	if withRead {
		if err := rb.run(); err != nil {
			return err
		}
	}
	if progress {
		fmt.Fprint(stderr, "\r\033[K")
	}
	for name, why := range skipped {
		fmt.Fprintf(stderr, "dio-check: skipped %s: %s\n", name, why)
	}
	if !*asJSON {
		if len(workloads) > 0 {
			printBench(stdout, dir, size, *value, *runs, buffers, results[:ingestResults])
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

// printBench prints the median of each row over the runs, with its ratios
// to std-fs, std-fs+fsync and fio from the same workload and buffer size.
func printBench(w io.Writer, dir string, size int64, value, runs int, buffers []int, results []BenchResult) {
	fsName, _ := direct.Filesystem(dir)
	fmt.Fprintf(w, "dio-check bench: %s of %d-byte values on %s (%s), median of %d run(s)\n\n", sizeName(int(size)), value, dir, fsName, runs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tbuffer\tengine\tMiB/s\t× std-fs\t× std-fs+fsync\t× fio\tpage cache\t")
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
		slices.Sort(v)
		return v[len(v)/2], pc, true
	}
	for _, wl := range ingest.Workloads {
		for _, buf := range buffers {
			base, _, _ := median(wl, buf, "std-fs")
			durable, _, _ := median(wl, buf, "std-fs+fsync")
			ref, _, _ := median(wl, buf, fioEngine)
			for _, e := range append(slices.Clone(ingest.Engines), ingest.Engine{Name: fioEngine}) {
				m, pc, ok := median(wl, buf, e.Name)
				if !ok {
					continue
				}
				cached := sizeName(int(pc))
				if e.Name == fioEngine {
					cached = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t\n", wl, sizeName(buf), e.Name, m, ratio(m, base), ratio(m, durable), ratio(m, ref), cached)
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
		fmt.Fprintf(tw, "%s\t", sizeName(buf))
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

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// parseSize reads "128MiB", "64KiB", "1GiB", "4096" (bytes); K, M and G
// are binary too.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive size", s)
	}
	return n * mult, nil
}

// sizeName prints a byte count as the flags take it.
func sizeName(n int) string {
	switch {
	case n == 0:
		return "0"
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
