package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dio-storage/dio/cmd/dio-check/internal/ingest"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/benchkit"
)

// The read section's shape, from issue 13's targets: one reader and 16
// sharing a Reader against fio at the same queue depth, and ReadBlobs in
// batches of 64 against fio at QD32.
var (
	readReaders   = []int{1, 16}
	fioReadDepths = []int{1, 16, 32}
)

const (
	readBatch     = 64
	readBatchQD   = 32        // the fio depth ReadBlobs is measured against
	readFileSize  = 256 << 20 // the blob file, unless -size says otherwise: issue 13's measurement
	fioReadReader = "fio randread"
	preadEngine   = "O_DIRECT"

	// cachedEngine is std-fs reading a file already whole in the page
	// cache, beside std-fs from cold: what it measures is memory.
	cachedEngine = "std-fs+cached"
)

// readEngines are the engine names of the Reader rows: ingest's, with
// std-fs+cached after std-fs.
func readEngines() []string {
	var names []string
	for _, e := range ingest.ReadEngines() {
		names = append(names, e.Name)
		if e.Policy == fallback.StdFS {
			names = append(names, cachedEngine)
		}
	}
	return names
}

// readRow is one row of the read table.
type readRow struct {
	reader  string // ingest.ReadBlob, ingest.ReadBlobs, ingest.Pread or fioReadReader
	readers int    // goroutines, or fio's queue depth (fioJobsEngine: its jobs, at QD1)
	batch   int
	engine  string
}

func (r readRow) matches(b BenchResult) bool {
	return b.Workload == ingest.Read && b.Reader == r.reader && b.Readers == r.readers && b.Batch == r.batch && b.Engine == r.engine
}

// readRows lists the rows in the order every round runs them.
func readRows(withFio bool) []readRow {
	var rows []readRow
	for _, e := range readEngines() {
		for _, n := range readReaders {
			rows = append(rows, readRow{ingest.ReadBlob, n, 0, e})
		}
		rows = append(rows, readRow{ingest.ReadBlobs, 1, readBatch, e})
	}
	for _, n := range readReaders {
		rows = append(rows, readRow{ingest.Pread, n, 0, preadEngine})
	}
	if withFio {
		for _, qd := range fioReadDepths {
			rows = append(rows, readRow{fioReadReader, qd, 0, fioReadEngine}, readRow{fioReadReader, qd, 0, fioSpanEngine})
		}
		for _, n := range readReaders {
			if n > 1 {
				rows = append(rows, readRow{fioReadReader, n, 0, fioJobsEngine})
			}
		}
	}
	return rows
}

// readBench is the read section's configuration.
type readBench struct {
	dir      string
	size     int64 // of the blob file
	runs     int
	duration time.Duration // per row
	withFio  bool
	progress *runProgress
	round    func(run int) string // ", round 2/3", or "" for one run
	tmp      *tempFiles
	skipped  map[string]string // why a row's engine or reader did not run, by name
	report   func(BenchResult) error

	// Set by run: fio's arguments for the fioSpanEngine rows, and their
	// mean request size.
	spans    []string
	spanMean int
}

// run writes one blob file into a directory of its own and reads it back
// with every row, round after round, and removes it.
func (b *readBench) run() error {
	// As for fio's writes, a directory of ours: if a signal removes it
	// before the blob file or fio opens, they fail instead of leaving a file.
	work, err := b.tmp.mkdirTemp(b.dir, ".dio-check-read-")
	if err != nil {
		return err
	}
	defer b.tmp.remove(work)
	path := filepath.Join(work, "blobs")
	b.progress.step(fmt.Sprintf("read: writing a %s blob file", sizeName(b.size)), stepCost{bytes: b.size})
	offs, err := ingest.WriteBlobFile(path, b.size)
	if err != nil {
		return fmt.Errorf("read: writing the blob file: %w", err)
	}
	if sizes, align, err := ingest.Spans(path, offs); err != nil {
		b.skipped[fioSpanEngine] = err.Error()
	} else {
		b.spans, b.spanMean = fioSpans(sizes, align)
	}
	if !ingest.HasReadBlobs() {
		b.skipped[ingest.ReadBlobs] = "this build's blobio.Reader has no ReadBlobs"
	}
	for run := range b.runs {
		for _, row := range readRows(b.withFio) {
			if b.skip(row) {
				b.progress.skip(stepCost{timed: b.duration})
				continue
			}
			b.progress.step("read: "+row.label()+b.round(run), stepCost{timed: b.duration})
			res, err := b.measure(row, path, offs, run)
			if errors.Is(err, ingest.ErrUnavailable) {
				b.skipped[row.skipKey()] = err.Error()
				continue
			}
			if err != nil && row.reader == fioReadReader { // such as O_DIRECT refused: the rows above say so
				b.skipped[row.engine] = err.Error()
				continue
			}
			if err != nil {
				return fmt.Errorf("read, %s: %w", row.label(), err)
			}
			res.Run = run + 1
			if err := b.report(res); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b readBench) skip(row readRow) bool {
	for _, k := range []string{row.skipKey(), row.reader} {
		if _, ok := b.skipped[k]; ok {
			return true
		}
	}
	return false
}

// skipKey names what a row needs: its engine, or for the references the
// reference itself.
func (r readRow) skipKey() string {
	if r.reader == ingest.Pread {
		return ingest.Pread
	}
	return r.engine
}

func (r readRow) label() string {
	switch r.reader {
	case ingest.ReadBlobs:
		return fmt.Sprintf("ReadBlobs(%d), %s", r.batch, r.engine)
	case fioReadReader:
		switch r.engine {
		case fioSpanEngine:
			return fmt.Sprintf("%s QD%d, blob spans", fioReadReader, r.readers)
		case fioJobsEngine:
			return fmt.Sprintf("%s, %d jobs at QD1", fioReadReader, r.readers)
		}
		return fmt.Sprintf("%s QD%d", fioReadReader, r.readers)
	}
	return fmt.Sprintf("%s ×%d, %s", r.reader, r.readers, r.engine)
}

// measure runs one row.
func (b readBench) measure(row readRow, path string, offs []int64, run int) (BenchResult, error) {
	res := BenchResult{Workload: ingest.Read, ValueSize: ingest.BlobSize, Bytes: b.size, Engine: row.engine,
		Reader: row.reader, Readers: row.readers, Batch: row.batch}
	if row.reader == fioReadReader {
		st, err := os.Stat(path)
		if err != nil {
			return res, err
		}
		// fio reads the device, which DropCache leaves no page cache in front of
		// for O_DIRECT; it is dropped for symmetry with the other rows.
		if err := benchkit.DropCache(path); err != nil {
			return res, err
		}
		var sizing []string
		res.ValueSize = fioReadBlock
		qd := row.readers
		switch row.engine {
		case fioSpanEngine:
			sizing, res.ValueSize = b.spans, b.spanMean
		case fioJobsEngine:
			qd = 1
			sizing = []string{"--bs=" + strconv.Itoa(fioReadBlock), "--numjobs=" + strconv.Itoa(row.readers), "--group_reporting"}
		}
		fr, err := runFioRead(path, st.Size(), qd, b.duration, b.tmp, sizing...)
		if err != nil {
			return res, err
		}
		res.Reads, res.ElapsedMs = fr.TotalIOs, fr.RuntimeMs
		res.ReadsS, res.MiBs = fr.IOPS, fr.BwBytes/(1<<20)
		res.CPUUsPerOp = cpuPerOp(fr.CPU, fr.TotalIOs)
		res.PageCacheBytes = -1
		return res, nil
	}
	c := ingest.ReadConfig{Path: path, Offsets: offs, Method: row.reader, Readers: row.readers, Batch: row.batch,
		Duration: b.duration, Seed: uint64(run)}
	if row.reader != ingest.Pread {
		name := row.engine
		if name == cachedEngine {
			name, c.Cached = "std-fs", true
		}
		engines := ingest.ReadEngines()
		i := slices.IndexFunc(engines, func(e ingest.Engine) bool { return e.Name == name })
		c.Engine = engines[i]
	}
	before := direct.Stats()
	r, err := ingest.RunRead(c)
	if err != nil {
		return res, err
	}
	res.dioFigures(direct.Stats().Sub(before))
	res.Reads, res.ReadsS, res.MiBs = r.Reads, r.ReadsPerSec(), r.MiBs()
	res.ElapsedMs = float64(r.Elapsed.Microseconds()) / 1000
	res.CPUUsPerOp = cpuPerOp(r.CPU, r.Reads)
	res.PageCacheBytes = r.PageCacheBytes
	return res, nil
}

// printReads prints the median of each read row over the runs, with its
// ratios to fio at the same queue depth, in 4 KiB requests and in the
// blobs' spans, and to pread from as many goroutines.
func printReads(w io.Writer, b readBench, results []BenchResult) {
	fsName, _ := direct.Filesystem(b.dir)
	fmt.Fprintf(w, "dio-check bench: random reads of %d-byte blobs from a %s blob file on %s (%s), %v per row, median of %d run(s)\n",
		ingest.BlobSize, sizeName(b.size), b.dir, fsName, b.duration, b.runs)
	if d := ramDevice(b.dir); d != "" {
		fmt.Fprintf(w, "(%s)\n", d)
	}
	fmt.Fprintf(w, "(the file is dropped from the page cache before every row, and the direct rows read the device every time;\n")
	fmt.Fprintf(w, "std-fs reads through the page cache, which keeps every block it reads: its row reads the device until it has\n")
	fmt.Fprintf(w, "read the file over once, memory after that, and %s starts with the whole file there, so their reads/s\n", cachedEngine)
	fmt.Fprintf(w, "and × fio set the page cache against the device; page cache: what the row left there)\n\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "reader\treaders\tengine\treads/s\tMiB/s\t× fio\t× spans\t× jobs\t× pread\tCPU µs/read\t× fio CPU\tpage cache\t")
	median := func(row readRow) (float64, float64, int64, bool) {
		var rs, ms []float64
		var pc int64
		for _, r := range results {
			if row.matches(r) {
				rs, ms = append(rs, r.ReadsS), append(ms, r.MiBs)
				pc = max(pc, r.PageCacheBytes)
			}
		}
		if len(rs) == 0 {
			return 0, 0, 0, false
		}
		return medianOf(rs), medianOf(ms), pc, true
	}
	cpuMedian := func(row readRow) float64 {
		var v []float64
		for _, r := range results {
			if row.matches(r) && r.CPUUsPerOp > 0 {
				v = append(v, r.CPUUsPerOp)
			}
		}
		return medianOf(v)
	}
	for _, row := range readRows(true) {
		rs, ms, pc, ok := median(row)
		if !ok {
			continue
		}
		qd, goroutines := row.readers, row.readers
		reader, readers := row.reader, strconv.Itoa(row.readers)
		cached := sizeName(pc)
		switch row.reader {
		case ingest.ReadBlobs:
			qd = readBatchQD
			reader = fmt.Sprintf("ReadBlobs(%d)", row.batch)
		case fioReadReader:
			readers, cached = "QD"+readers, "-"
			if row.engine == fioJobsEngine {
				readers = strconv.Itoa(row.readers) + "×QD1"
			}
		}
		fioRow := readRow{fioReadReader, qd, 0, fioReadEngine}
		fio, _, _, _ := median(fioRow)
		spans, _, _, _ := median(readRow{fioReadReader, qd, 0, fioSpanEngine})
		pread, _, _, _ := median(readRow{ingest.Pread, goroutines, 0, preadEngine})
		var jobs float64
		if row.reader != ingest.ReadBlobs {
			jobs, _, _, _ = median(readRow{fioReadReader, goroutines, 0, fioJobsEngine})
		}
		cpu := cpuMedian(row)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", reader, readers, row.engine, rs, ms, ratio(rs, fio), ratio(rs, spans), ratio(rs, jobs), ratio(rs, pread),
			cpuCell(cpu), ratio(cpu, cpuMedian(fioRow)), cached)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nreaders: goroutines sharing one Reader (pread: one O_DIRECT file), or fio's iodepth; ReadBlobs(%d): batches of %d random offsets\n", readBatch, readBatch)
	fmt.Fprintf(w, "from one goroutine, set against fio QD%d; × pread: against pread from as many goroutines. MiB/s: blob bytes returned\n", readBatchQD)
	fmt.Fprintf(w, "(fio: %d-byte reads, --rw=randread --direct=1 --ioengine=io_uring); pread reads each blob's aligned span.\n", fioReadBlock)
	fmt.Fprintf(w, "CPU µs/read: the whole process's user+system time per read (io_uring's io-wq workers included), fio's counted\n")
	fmt.Fprintf(w, "the same way, as our child's rusage; × fio CPU: against fio at the same queue depth, in %d-byte reads.\n", fioReadBlock)
	n := readReaders[len(readReaders)-1]
	fmt.Fprintf(w, "× jobs: against fio as %d jobs at QD1 (%d×QD1), the shape of %d goroutines with a read each, which some devices\n", n, n, n)
	fmt.Fprintf(w, "serve much slower than one submitter at QD%d, whoever submits; its × fio is against fio QD%d.\n", n, n)
	if b.spans != nil {
		fmt.Fprintf(w, "× spans: against fio reading what the Reader reads, each blob's aligned span (%s, mean %d bytes).\n", strings.Join(b.spans, " "), b.spanMean)
	}
}

// fioSpanEngine names the read reference rows that read what the Reader
// reads: fio randread in requests of the blobs' aligned spans, in the
// same proportions and at the file's offset alignment (fioSpans), so
// that a Reader row and its reference move the same bytes per read.
const fioSpanEngine = "fio io_uring spans"

// fioSpans returns fio's arguments for requests of the sizes in sizes
// (a count of blobs per span size, from ingest.Spans) at offsets aligned
// to align: --bssplit with each size's share in whole percent (a share
// under 1% is left out; the largest takes what rounding left over) and
// --blockalign. It also returns the mean request size.
func fioSpans(sizes map[int64]int, align int64) (args []string, mean int) {
	total, bytes := 0, int64(0)
	for size, n := range sizes {
		total += n
		bytes += size * int64(n)
	}
	if total == 0 {
		return []string{"--bs=" + strconv.Itoa(fioReadBlock)}, fioReadBlock
	}
	type share struct {
		size int64
		pct  int
	}
	var shares []share
	sum, big := 0, -1
	for _, size := range slices.Sorted(maps.Keys(sizes)) {
		pct := int(math.Round(100 * float64(sizes[size]) / float64(total)))
		if pct == 0 {
			continue
		}
		shares = append(shares, share{size, pct})
		sum += pct
		if big < 0 || sizes[size] > sizes[shares[big].size] {
			big = len(shares) - 1
		}
	}
	shares[big].pct += 100 - sum
	parts := make([]string, len(shares))
	for i, sh := range shares {
		parts[i] = fmt.Sprintf("%d/%d", sh.size, sh.pct)
	}
	return []string{"--bssplit=" + strings.Join(parts, ":"), "--blockalign=" + strconv.FormatInt(align, 10)},
		int(bytes / int64(total))
}
