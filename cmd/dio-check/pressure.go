package main

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/benchkit"
	"github.com/dio-storage/dio/internal/cgroup"
)

// pressureChildCmd is the hidden subcommand the pressure command re-runs
// itself as, inside the cgroup.
const pressureChildCmd = "__pressure-child"

// alone names the row of the co-tenant measured without an ingest.
const alone = "alone"

// busyCPU names a reference row, not an engine: the co-tenant beside a
// goroutine that keeps one CPU busy on a thread of its own, with no I/O
// and no memory traffic. What the co-tenant loses beside it is what any
// busy neighbour costs it on the machine (on a virtual machine, a
// hypervisor that shares the physical core), the floor against which the
// ingest rows are read.
const busyCPU = "cpu"

// pressureEngines are the ingest engines, in the order they run, and the
// fallback policy each opens its blob file with, after busyCPU.
var pressureEngines = []struct {
	name   string
	policy fallback.Policy
}{
	{busyCPU, 0}, // opens no file
	{"std-fs", fallback.StdFS},
	{"std-fs+dontcache", fallback.DontCache},
	{"direct+pwrite", fallback.DirectPwrite},
	{"direct+io_uring", fallback.Direct},
}

func enginePolicy(name string) (fallback.Policy, bool) {
	for _, e := range pressureEngines {
		if e.name == name {
			return e.policy, true
		}
	}
	return 0, false
}

// PressureRow is one row of the pressure table; -json prints one per line
// with exactly these keys.
type PressureRow struct {
	Engine          string  `json:"engine"`
	IngestMiBs      float64 `json:"ingest_mib_s"`
	WriteP99Us      float64 `json:"write_p99_us"`
	WriteMaxUs      float64 `json:"write_max_us"`
	CotenantReadsS  float64 `json:"cotenant_reads_s"`
	CotenantP50Us   float64 `json:"cotenant_p50_us"`
	CotenantP99Us   float64 `json:"cotenant_p99_us"`
	CotenantP999Us  float64 `json:"cotenant_p999_us"`
	MemoryPeakBytes int64   `json:"memory_peak_bytes"`

	// DeviceWriteP99Us, WriteAmp and SyncP99Us are what direct.Stats saw
	// of the ingest, as a service would see it: the p99 of the writes
	// that reached the kernel (write_p99_us is the WriteBlob calls',
	// mostly a copy into a buffer), the bytes written over the bytes
	// the ingest asked for, and the p99 of its fdatasyncs. Absent where
	// nothing was ingested.
	DeviceWriteP99Us float64 `json:"device_write_p99_us,omitempty"`
	WriteAmp         float64 `json:"write_amp,omitempty"`
	SyncP99Us        float64 `json:"sync_p99_us,omitempty"`

	// CPUStealPct is the share of the CPUs' time the hypervisor took
	// for itself while the co-tenant was measured (/proc/stat's steal),
	// in percent: on a virtual machine the host's own work for the
	// guest's disk I/O can run on the cores the guest's vCPUs run on,
	// which the co-tenant then loses whatever the ingest does in the
	// guest.
	CPUStealPct float64 `json:"cpu_steal_pct"`
}

// rowDetail is what the child measured beyond the row: for the table, the
// plot and the skipped engines.
type rowDetail struct {
	CotenantMaxUs float64              `json:"cotenant_max_us"`
	HotCached     float64              `json:"hot_cached"` // the least fraction of the hot file in the page cache during the phase
	Mode          string               `json:"mode"`
	Hist          []benchkit.HistPoint `json:"hist"`
}

// pressureMsg is one line the child prints for the parent: a phase that
// starts, a tick while it measures, a skipped engine, a note, or a row.
type pressureMsg struct {
	Phase   string       `json:"phase,omitempty"`
	Step    string       `json:"step,omitempty"`
	Elapsed int          `json:"elapsed,omitempty"` // whole seconds measured so far
	Skip    string       `json:"skip,omitempty"`
	Why     string       `json:"why,omitempty"`
	Note    string       `json:"note,omitempty"` // something the reader of the table must know, printed once
	Row     *PressureRow `json:"row,omitempty"`
	Detail  *rowDetail   `json:"detail,omitempty"`
}

type pressureConfig struct {
	json        bool
	memory      int64
	hot         int64
	seconds     int
	rounds      int
	engines     []string
	enginesFlag string // -engines, which parses into engines
	plot        string
	throttle    int64 // -throttle: bytes a second; 0: the directory's own device
	writers     int
	shape       string
	lead        int
	dir         string
	device      string // the throttled device, for the table's header
	load        string // the machine's load during the run, for the table's header
}

// loadAverage returns the one-minute load average, or "?": the numbers in
// a pressure table are only as quiet as the machine was.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// minPressureMemory is the smallest -memory: below it the Go runtime and
// the writers' buffers alone crowd the cgroup.
const minPressureMemory = 64 << 20

// pressureFlags returns pressure's flags, which parse into c (all but
// dir and load).
func pressureFlags() (*flag.FlagSet, *pressureConfig) {
	c := pressureConfig{memory: 1 << 30, hot: 600 << 20, writers: defaultWriters, shape: defaultShape, lead: defaultLead}
	fs := flag.NewFlagSet("dio-check pressure", flag.ContinueOnError)
	fs.BoolVar(&c.json, "json", false, "print one JSON object per row; a directory pressure cannot use gets {\"dir\", \"error\"}")
	fs.Var((*sizeValue)(&c.memory), "memory", "the memory cgroup's limit in `bytes`")
	fs.Var((*sizeValue)(&c.hot), "hot", "the `bytes` of the co-tenant's hot file, warmed into the page cache inside the cgroup")
	fs.IntVar(&c.seconds, "seconds", 10, "seconds the co-tenant is measured, alone and beside each ingest")
	fs.IntVar(&c.rounds, "rounds", 1, "rounds, each measuring alone and every engine once, interleaved; the table shows medians")
	fs.StringVar(&c.enginesFlag, "engines", "all", "ingest engines, comma-separated: "+engineNames()+" ("+busyCPU+": a busy CPU and no ingest, for reference)")
	fs.StringVar(&c.plot, "plot", "", "draw the co-tenant's latency distributions into `FILE` (.png or .svg)")
	fs.Var((*rateValue)(&c.throttle), "throttle", "measure on a new ext4 on a loop device over a file in the directory, its writes limited to `RATE` a second (200MiB), for every engine; all of it removed at the end")
	fs.IntVar(&c.writers, "writers", c.writers, "ingest writers, each writing files of its own")
	fs.StringVar(&c.shape, "shape", c.shape, "the ingest's `shape`: "+shapeAppend+" (a log: blobs appended, the file synced and removed as it rolls) or "+shapeCompact+" (a flush and a compaction: 64MiB of blobs written and synced, read back and written again)")
	fs.IntVar(&c.lead, "lead", c.lead, "`seconds` each ingest runs before the co-tenant is measured: the page cache fills in the first seconds, and the harm comes after")
	return fs, &c
}

// The ingest's defaults, chosen by measurement (docs/pressure.md): on a
// device throttled to 200 MiB/s one std-fs writer of a log that syncs
// only as it rolls (every few GiB, as a log that leaves durability to
// replication does; Kafka never fsyncs by default) fills a 1 GiB cgroup
// with dirty pages, while the same log that syncs every 64 MiB, or the
// compact shape, which does, barely harms the co-tenant. The harm builds
// over seconds: measured from the ingest's start the co-tenant kept 0.75x
// its reads/s, measured from 3 s in 0.016x.
const (
	defaultWriters = 1
	defaultShape   = shapeAppend
	defaultLead    = 3
)

// rateValue is a rate flag: a size a second, "/s" optional.
type rateValue int64

func (v *rateValue) String() string {
	if v == nil || *v == 0 {
		return "" // unset: the synopsis shows [-throttle RATE]
	}
	return sizeName(int64(*v)) + "/s"
}

func (v *rateValue) Set(s string) error {
	n, err := parseSize(strings.TrimSuffix(s, "/s"))
	if err == nil && n <= 0 {
		err = errors.New("want a positive rate")
	}
	if err == nil {
		*v = rateValue(n)
	}
	return err
}

func parsePressure(args []string, stdout io.Writer) (pressureConfig, error) {
	fs, cp := pressureFlags()
	dirs, err := parseFlags(fs, args, stdout, func(w io.Writer) { printFlags(w, fs) })
	c := *cp
	if err != nil {
		return c, err
	}
	bad := func(msg string) error { return badUsage(fs, msg) }
	if len(dirs) != 1 {
		return c, bad("pressure takes exactly one directory")
	}
	c.dir = dirs[0]
	switch {
	case c.memory < minPressureMemory:
		return c, bad(fmt.Sprintf("-memory %s: want at least %s", sizeName(c.memory), sizeName(minPressureMemory)))
	case c.hot%4096 != 0:
		return c, bad("-hot: want a multiple of 4KiB")
	case c.hot >= c.memory:
		return c, bad(fmt.Sprintf("-hot %s: must be below -memory %s, or the co-tenant cannot stay warm", sizeName(c.hot), sizeName(c.memory)))
	case c.seconds < 1:
		return c, bad("-seconds must be at least 1")
	case c.rounds < 1:
		return c, bad("-rounds must be at least 1")
	case c.writers < 1:
		return c, bad("-writers must be at least 1")
	case c.shape != shapeAppend && c.shape != shapeCompact:
		return c, bad(fmt.Sprintf("-shape %q: want %s or %s", c.shape, shapeAppend, shapeCompact))
	case c.lead < 0:
		return c, bad("-lead must not be negative")
	}
	if c.engines, err = parseEngines(c.enginesFlag); err != nil {
		return c, bad("-engines: " + err.Error())
	}
	if c.plot != "" {
		if ext := filepath.Ext(c.plot); ext != ".png" && ext != ".svg" {
			return c, bad(fmt.Sprintf("-plot %s: want a .png or .svg file", c.plot))
		}
	}
	return c, nil
}

func engineNames() string {
	var names []string
	for _, e := range pressureEngines {
		names = append(names, e.name)
	}
	return strings.Join(names, ",")
}

// parseEngines reads -engines: "all", or names from pressureEngines, each
// once; they run in the order given.
func parseEngines(s string) ([]string, error) {
	if s == "all" {
		return strings.Split(engineNames(), ","), nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if _, ok := enginePolicy(name); !ok {
			return nil, fmt.Errorf("unknown engine %q (known: %s, or all)", name, engineNames())
		}
		for _, o := range out {
			if o == name {
				return nil, fmt.Errorf("engine %q given twice", name)
			}
		}
		out = append(out, name)
	}
	return out, nil
}

// discoverCgroups finds the cgroup hierarchies; tests replace it to run
// pressure on a machine without a memory controller.
var discoverCgroups = cgroup.Discover

func runPressure(args []string, stdout, stderr io.Writer, tmp *tempFiles) error {
	c, err := parsePressure(args, stdout)
	if err != nil {
		return err
	}
	// A directory pressure cannot use is an object on stdout under
	// -json, as in the probe.
	if err := checkDir(c.dir); err != nil {
		return dirError(stdout, c.json, c.dir, err)
	}
	// A file in tmpfs or ramfs is memory that reclaim cannot write back
	// and drop (no swap here): an ingest into it fills the cgroup until
	// the OOM killer ends the run, which measures nothing of dio's. A
	// throttled run measures on the ext4 it makes, whatever holds its
	// backing file.
	if fsName, _ := direct.Filesystem(c.dir); c.throttle == 0 && (fsName == "tmpfs" || fsName == "ramfs") {
		return dirError(stdout, c.json, c.dir, usageError{msg: fmt.Sprintf("%s: %s holds files in memory that reclaim cannot drop; pressure needs a directory on a disk", c.dir, fsName)})
	}
	if os.Geteuid() != 0 {
		return usageError{msg: "pressure needs root: it makes a memory cgroup"}
	}
	roots, err := discoverCgroups()
	if err != nil {
		return usageError{msg: "pressure: finding the cgroup hierarchies: " + err.Error()}
	}
	if _, _, err := cgroup.Choose(cgroup.OS{}, roots); err != nil {
		return usageError{msg: "pressure: " + err.Error()}
	}
	if c.throttle > 0 {
		if err := cgroup.CanThrottle(cgroup.OS{}, roots); err != nil {
			return usageError{msg: "pressure -throttle: " + err.Error()}
		}
		if avail, err := availBytes(c.dir); err == nil && avail < deviceNeeds(c) {
			return dirError(stdout, c.json, c.dir, usageError{msg: fmt.Sprintf("%s: -throttle needs %s free for its device, %s is", c.dir, sizeName(deviceNeeds(c)), sizeName(avail))})
		}
	}
	// The cgroup is tracked like a temporary file, so that a signal's
	// cleanup, once it has killed the child, removes it too; it is
	// tracked by its name, since cgroup.New chooses its parent.
	// Named for the process and a random suffix: pids repeat across
	// containers sharing a hierarchy and after a SIGKILLed run left its
	// cgroup behind. A cgroup is made by a mkdir in the cgroup
	// filesystem, which os.MkdirTemp would do but cgroup.New's FS (faked
	// in tests) does not.
	name := fmt.Sprintf("dio-check-pressure-%d-%s", os.Getpid(), rand.Text()[:8])
	var cg *cgroup.Cgroup
	err = tmp.makeNewFunc("cgroup "+name, func() (err error) {
		cg, err = cgroup.New(cgroup.OS{}, roots, name, c.memory)
		return err
	}, func() {
		if err := cg.Remove(); err != nil {
			fmt.Fprintln(stderr, "dio-check:", err)
		}
	})
	if err != nil {
		return usageError{msg: "pressure: making the memory cgroup: " + err.Error()}
	}
	defer tmp.remove("cgroup " + name)
	fmt.Fprintf(stderr, "dio-check pressure: cgroup %s (v%d, %s)\n", cg.Dir, cg.Version, sizeName(c.memory))

	measureIn := c.dir
	if c.throttle > 0 {
		dev, err := throttledDevice(c, cg, name, stderr, tmp)
		if err != nil {
			return err
		}
		defer tmp.remove("device " + name)
		measureIn = dev.Mnt
		c.device = fmt.Sprintf("a %s ext4 on %s, writes throttled to %s/s", sizeName(deviceSize(c)), dev, sizeName(c.throttle))
	}

	work, err := tmp.mkdirTemp(measureIn, ".dio-pressure-")
	if err != nil {
		return dirError(stdout, c.json, c.dir, usageError{msg: fmt.Sprintf("%s: cannot create a directory: %v", c.dir, err)})
	}
	defer tmp.remove(work)

	loadBefore := loadAverage()
	rows, details, notes, err := runPressureChild(c, cg, work, stderr, tmp)
	if err != nil {
		return err
	}
	c.load = fmt.Sprintf("load average %s at the start, %s at the end", loadBefore, loadAverage())
	for _, n := range notes {
		fmt.Fprintln(stderr, "dio-check:", n)
	}
	if c.json {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	} else {
		printPressure(stdout, c, cg.Version, rows, details)
	}
	if c.plot != "" {
		if err := plotPressure(c, rows, details); err != nil {
			return fmt.Errorf("-plot: %w", err)
		}
	}
	return nil
}

// deviceRoll is the roll size -throttle's device gives each writer's
// files (rollSize: a quarter of the free space, shared by the writers):
// twice the cgroup's memory, so that a log's roll, which syncs it, does
// not come every few seconds, as it would on a small device.
func deviceRoll(memory int64) int64 { return 2 * memory }

// deviceSize is the size of -throttle's device: the hot file and four
// rolls per writer. Its file is sparse and the filesystem mounted with
// discard, so it holds about what deviceNeeds says.
func deviceSize(c pressureConfig) int64 {
	return c.hot + int64(c.writers)*4*deviceRoll(c.memory)
}

// deviceNeeds is the space -throttle's device file may take in the
// directory: the hot file, a roll per writer, and ext4's own 5%.
func deviceNeeds(c pressureConfig) int64 {
	return (c.hot + int64(c.writers)*deviceRoll(c.memory)) * 105 / 100
}

// throttledDevice makes -throttle's loop device in c.dir, tracked as
// "device "+name, and limits its writes through cg.
func throttledDevice(c pressureConfig, cg *cgroup.Cgroup, name string, stderr io.Writer, tmp *tempFiles) (*benchkit.LoopDevice, error) {
	var dev *benchkit.LoopDevice
	err := tmp.makeNewFunc("device "+name, func() (err error) {
		dev, err = benchkit.MakeLoopDevice(c.dir, deviceSize(c))
		return err
	}, func() {
		if err := dev.Remove(); err != nil {
			fmt.Fprintln(stderr, "dio-check:", err)
		}
	})
	if err != nil {
		return nil, usageError{msg: "pressure -throttle: making the device: " + err.Error()}
	}
	if err := cg.ThrottleWrites(dev.MajMin, c.throttle); err != nil {
		tmp.remove("device " + name)
		return nil, usageError{msg: "pressure -throttle: " + err.Error()}
	}
	dev.Unthrottle = cg.Unthrottle
	fmt.Fprintf(stderr, "dio-check pressure: device %s on %s, writes throttled to %s/s\n", dev, dev.Mnt, sizeName(c.throttle))
	return dev, nil
}

// runPressureChild runs the work in a child process placed in the cgroup,
// relaying its progress to stderr, and returns its rows.
func runPressureChild(c pressureConfig, cg *cgroup.Cgroup, work string, stderr io.Writer, tmp *tempFiles) ([]PressureRow, []rowDetail, []string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.Command(exe, pressureChildCmd,
		"-cgroup", cg.Dir, "-cgroup-version", strconv.Itoa(int(cg.Version)),
		"-hot", strconv.FormatInt(c.hot, 10), "-seconds", strconv.Itoa(c.seconds), "-rounds", strconv.Itoa(c.rounds),
		"-engines", strings.Join(c.engines, ","), "-writers", strconv.Itoa(c.writers), "-shape", c.shape, "-lead", strconv.Itoa(c.lead), work)
	cmd.Stderr = stderr
	childAttrs(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := tmp.start(cmd); err != nil {
		return nil, nil, nil, err
	}
	prog := newProgress(stderr, c.seconds)
	rows, details, notes, derr := readChild(out, prog)
	io.Copy(io.Discard, out)
	prog.done()
	if err := tmp.wait(cmd); err != nil {
		return nil, nil, nil, fmt.Errorf("pressure: the measuring process: %w", err)
	}
	if derr != nil {
		return nil, nil, nil, fmt.Errorf("pressure: reading the measuring process: %w", derr)
	}
	rows, details = medians(rows, details)
	return rows, details, notes, nil
}

// readChild reads the measuring process's messages until its output ends:
// the rows with their details, the skipped engines and notes (each once,
// in the order they came), and the phases, shown on prog.
func readChild(r io.Reader, prog *progress) ([]PressureRow, []rowDetail, []string, error) {
	var rows []PressureRow
	var details []rowDetail
	var notes []string
	seen := map[string]bool{}
	dec := json.NewDecoder(r)
	for {
		var m pressureMsg
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return rows, details, notes, nil
		} else if err != nil {
			return nil, nil, nil, err
		}
		switch {
		case m.Row != nil && m.Detail != nil:
			rows, details = append(rows, *m.Row), append(details, *m.Detail)
		case m.Skip != "":
			if !seen["skip: "+m.Skip] {
				notes = append(notes, "skipped "+m.Skip+": "+m.Why)
				seen["skip: "+m.Skip] = true
			}
		case m.Note != "":
			if !seen["note: "+m.Note] {
				notes = append(notes, m.Note)
				seen["note: "+m.Note] = true
			}
		default:
			prog.update(m)
		}
	}
}

// medians folds the rounds' rows into one per engine, in the order they
// first ran: each number the median of its rounds (the upper one of an
// even count), the latency distributions merged, the worst read and the
// least of the hot file cached the extremes.
func medians(rows []PressureRow, details []rowDetail) ([]PressureRow, []rowDetail) {
	var order []string
	byEngine := map[string][]int{}
	for i, r := range rows {
		if _, ok := byEngine[r.Engine]; !ok {
			order = append(order, r.Engine)
		}
		byEngine[r.Engine] = append(byEngine[r.Engine], i)
	}
	var outRows []PressureRow
	var outDetails []rowDetail
	for _, e := range order {
		idx := byEngine[e]
		med := func(f func(PressureRow) float64) float64 {
			v := make([]float64, len(idx))
			for j, i := range idx {
				v[j] = f(rows[i])
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		outRows = append(outRows, PressureRow{
			Engine:          e,
			IngestMiBs:      med(func(r PressureRow) float64 { return r.IngestMiBs }),
			WriteP99Us:      med(func(r PressureRow) float64 { return r.WriteP99Us }),
			WriteMaxUs:      med(func(r PressureRow) float64 { return r.WriteMaxUs }),
			CotenantReadsS:  med(func(r PressureRow) float64 { return r.CotenantReadsS }),
			CotenantP50Us:   med(func(r PressureRow) float64 { return r.CotenantP50Us }),
			CotenantP99Us:   med(func(r PressureRow) float64 { return r.CotenantP99Us }),
			CotenantP999Us:  med(func(r PressureRow) float64 { return r.CotenantP999Us }),
			MemoryPeakBytes: int64(med(func(r PressureRow) float64 { return float64(r.MemoryPeakBytes) })),
			CPUStealPct:     med(func(r PressureRow) float64 { return r.CPUStealPct }),

			DeviceWriteP99Us: med(func(r PressureRow) float64 { return r.DeviceWriteP99Us }),
			WriteAmp:         med(func(r PressureRow) float64 { return r.WriteAmp }),
			SyncP99Us:        med(func(r PressureRow) float64 { return r.SyncP99Us }),
		})
		d := rowDetail{HotCached: 1, Mode: details[idx[0]].Mode}
		var h benchkit.Histogram
		for _, i := range idx {
			d.CotenantMaxUs = max(d.CotenantMaxUs, details[i].CotenantMaxUs)
			d.HotCached = min(d.HotCached, details[i].HotCached)
			h.Merge(benchkit.FromPoints(details[i].Hist))
		}
		d.Hist = h.Points()
		outDetails = append(outDetails, d)
	}
	return outRows, outDetails
}

// progress shows the child's phases on stderr: one live line on a
// terminal, fitted to its width as the bench's bar is, a line per phase
// and step otherwise.
type progress struct {
	w       io.Writer
	live    bool
	width   int // the terminal's columns (0: unknown)
	seconds int
	last    string
}

func newProgress(w io.Writer, seconds int) *progress {
	live, width := isTerminal(w)
	return &progress{w: w, live: live, width: width, seconds: seconds}
}

func (p *progress) update(m pressureMsg) {
	line := m.Phase + ": " + m.Step
	if p.live {
		// On a narrow terminal the phase loses its middle, keeping the
		// round, the step and the seconds measured.
		tail := ""
		if m.Elapsed > 0 {
			tail = fmt.Sprintf(" %d/%d s", m.Elapsed, p.seconds)
		}
		fmt.Fprintf(p.w, "\r\033[K%s", fitLine("dio-check pressure: ", line, tail, p.width))
		return
	}
	if line != p.last {
		fmt.Fprintf(p.w, "dio-check pressure: %s\n", line)
		p.last = line
	}
}

func (p *progress) done() {
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func printPressure(w io.Writer, c pressureConfig, v cgroup.Version, rows []PressureRow, details []rowDetail) {
	fsName, _ := direct.Filesystem(c.dir)
	fmt.Fprintf(w, "dio-check pressure: in a %s memory cgroup (v%d), a co-tenant reads a warm %s file at random, 4 KiB through the page cache,\n", sizeName(c.memory), v, sizeName(c.hot))
	writers := "1 writer"
	if c.writers != 1 {
		writers = fmt.Sprintf("%d writers", c.writers)
	}
	fmt.Fprintf(w, "alone and beside an ingest of 8 KiB blobs per engine (%s, %s, started %d s ahead), %d s each", c.shape, writers, c.lead, c.seconds)
	if c.rounds > 1 {
		fmt.Fprintf(w, ", medians of %d interleaved rounds", c.rounds)
	}
	if c.device != "" {
		fmt.Fprintf(w, ", on %s, in %s (%s)", c.device, c.dir, fsName)
	} else {
		fmt.Fprintf(w, ", on %s (%s)", c.dir, fsName)
	}
	if c.load != "" {
		fmt.Fprintf(w, ", %d CPUs, %s", runtime.NumCPU(), c.load)
	}
	fmt.Fprint(w, "\n\n")
	var base PressureRow
	for _, r := range rows {
		if r.Engine == alone {
			base = r
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "engine\tingest MiB/s\twrite p99\twrite max\tdevice p99\tsync p99\tw-amp\treads/s\t× alone\tp50\tp99\t× alone\tp99.9\tmax\tmemory peak\thot cached\tcpu steal\t")
	orDash := func(v float64, s string) string { // a figure direct.Stats did not see
		if v == 0 {
			return "-"
		}
		return s
	}
	for i, r := range rows {
		ingestCells := "-\t-\t-\t-\t-\t-"
		if r.Engine != alone && r.Engine != busyCPU {
			ingestCells = fmt.Sprintf("%.0f\t%s\t%s\t%s\t%s\t%s", r.IngestMiBs, usName(r.WriteP99Us), usName(r.WriteMaxUs),
				orDash(r.DeviceWriteP99Us, usName(r.DeviceWriteP99Us)), orDash(r.SyncP99Us, usName(r.SyncP99Us)),
				orDash(r.WriteAmp, fmt.Sprintf("%.2f", r.WriteAmp)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f%%\t%.0f%%\t\n", r.Engine, ingestCells,
			countName(r.CotenantReadsS), times(r.CotenantReadsS, base.CotenantReadsS),
			usName(r.CotenantP50Us), usName(r.CotenantP99Us), times(r.CotenantP99Us, base.CotenantP99Us),
			usName(r.CotenantP999Us), usName(details[i].CotenantMaxUs), sizeName(r.MemoryPeakBytes), 100*details[i].HotCached,
			r.CPUStealPct)
	}
	tw.Flush()
}

// times prints a/b with about three significant digits: the harm spans
// three orders of magnitude either way.
func times(a, b float64) string {
	r := a / b
	switch {
	case b == 0:
		return "-"
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	case r >= 10:
		return fmt.Sprintf("%.1f", r)
	case r >= 0.1:
		return fmt.Sprintf("%.2f", r)
	}
	return fmt.Sprintf("%.3f", r)
}

// usName prints microseconds with three significant digits or so.
func usName(us float64) string {
	d := time.Duration(us * 1e3)
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0fms", us/1e3)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1fms", us/1e3)
	case d >= 10*time.Microsecond:
		return fmt.Sprintf("%.0fµs", us)
	}
	return fmt.Sprintf("%.1fµs", us)
}

// countName prints a rate with thousands separators.
func countName(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
