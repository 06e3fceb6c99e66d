package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
)

// Probe is what dio-check learns about one directory; -json prints it.
type Probe struct {
	Dir           string `json:"dir"`
	FS            string `json:"fs"`
	Device        string `json:"device,omitempty"`
	LogicalBlock  int    `json:"logical_block,omitempty"`
	PhysicalBlock int    `json:"physical_block,omitempty"`
	ODirect       bool   `json:"o_direct"`
	ODirectError  string `json:"o_direct_error,omitempty"`
	MemAlign      int    `json:"mem_align"`
	OffsetAlign   int    `json:"offset_align"`
	AlignSource   string `json:"align_source,omitempty"`
	MinWriteAlign int    `json:"min_write_align"`
	AtomicMin     int    `json:"atomic_write_min"` // untorn writes (RWF_ATOMIC) from this many bytes; 0: none
	AtomicMax     int    `json:"atomic_write_max"` // to this many
	IOURing       bool   `json:"io_uring"`
	IOURingError  string `json:"io_uring_error,omitempty"`
	DontCache     bool   `json:"dontcache"` // buffered writes with RWF_DONTCACHE work
	DontCacheErr  string `json:"dontcache_error,omitempty"`
	CheckError    string `json:"check_error,omitempty"` // a write and read back through the chosen path failed
	Mode          string `json:"mode"`
	Reason        string `json:"reason"`
}

// candidateAligns are the write sizes tried, smallest first, to find the
// smallest the file accepts.
var candidateAligns = []int{direct.MinAlignment, 1024, 2048, direct.DefaultAlignment}

// probeOptions are the probe's flags.
type probeOptions struct {
	json    bool
	require string
}

func probeFlags() (*flag.FlagSet, *probeOptions) {
	var o probeOptions
	fs := flag.NewFlagSet("dio-check", flag.ContinueOnError)
	fs.BoolVar(&o.json, "json", false, "print one JSON object per directory; one that cannot be probed gets {\"dir\", \"error\"}")
	fs.StringVar(&o.require, "require", "", "`direct`: exit 1 unless every directory gets O_DIRECT")
	return fs, &o
}

// ProbeError is what -json prints for a directory that cannot be probed,
// or that bench or pressure cannot use.
type ProbeError struct {
	Dir   string `json:"dir"`
	Error string `json:"error"`
}

// dirError returns err, why dir cannot be probed or used, having printed
// it as a ProbeError on stdout under -json (asJSON), for whatever reads
// the objects; the caller's error goes to stderr as ever.
func dirError(stdout io.Writer, asJSON bool, dir string, err error) error {
	if asJSON {
		if jerr := encodeDirError(stdout, dir, err); jerr != nil {
			return jerr
		}
	}
	return err
}

// encodeDirError prints err, why dir cannot be probed or used, as a
// ProbeError on w.
func encodeDirError(w io.Writer, dir string, err error) error {
	return json.NewEncoder(w).Encode(ProbeError{Dir: dir, Error: err.Error()})
}

func runProbe(args []string, stdout, stderr io.Writer, tmp *tempFiles) error {
	fs, o := probeFlags()
	dirs, err := parseFlags(fs, args, stdout, usage)
	if err != nil {
		return err
	}
	if o.require != "" && o.require != "direct" {
		return badUsage(fs, fmt.Sprintf("-require %q: only \"direct\" is known", o.require))
	}
	if len(dirs) == 0 {
		return badUsage(fs, "no directory given")
	}
	// Each directory in turn: a result, or why it cannot be probed (an
	// object on stdout under -json, a line on stderr), and on to the
	// next, so that one bad directory hides none of the others.
	var probes []Probe
	notProbed := false
	for _, dir := range dirs {
		p, err := checkAndProbe(dir, tmp)
		if err != nil {
			if o.json {
				if err := encodeDirError(stdout, dir, err); err != nil {
					return err
				}
			}
			fmt.Fprintln(stderr, "dio-check:", err)
			notProbed = true
			continue
		}
		probes = append(probes, p)
		if o.json {
			if err := json.NewEncoder(stdout).Encode(p); err != nil {
				return err
			}
		}
	}
	if !o.json && len(probes) > 0 {
		printProbes(stdout, probes)
	}
	unmet := false
	if o.require == "direct" {
		for _, p := range probes {
			if !p.ODirect {
				fmt.Fprintf(stderr, "dio-check: %s would not get O_DIRECT: %s\n", p.Dir, p.Reason)
				unmet = true
			}
		}
	}
	switch {
	case notProbed:
		return errReported
	case unmet:
		return errRequire
	}
	return nil
}

// checkAndProbe probes dir, after checking that it is a directory.
func checkAndProbe(dir string, tmp *tempFiles) (Probe, error) {
	if err := checkDir(dir); err != nil {
		return Probe{}, err
	}
	return probe(dir, tmp)
}

// checkDir refuses a path that is missing or not a directory.
func checkDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return usageError{msg: err.Error()}
	}
	if !st.IsDir() {
		return usageError{msg: dir + ": not a directory"}
	}
	return nil
}

// createTemp creates and tracks an empty file in dir whose name starts
// with prefix.
func createTemp(dir, prefix string, tmp *tempFiles) (string, error) {
	path, err := tmp.MakeTemp(func() (string, error) {
		f, err := os.CreateTemp(dir, prefix)
		if err != nil {
			return "", err
		}
		return f.Name(), f.Close()
	})
	if err != nil {
		return "", usageError{msg: fmt.Sprintf("%s: cannot create a file: %v", dir, err)}
	}
	return path, nil
}

// probe probes dir: what the library chooses there and why, asked of
// fallback.ProbeFile, and what dio-check measures beside it (the
// alignment and its source, the smallest write the kernel takes, untorn
// writes), on one temporary file.
func probe(dir string, tmp *tempFiles) (Probe, error) {
	p := Probe{Dir: dir}
	var err error
	if p.FS, err = direct.Filesystem(dir); err != nil {
		return p, usageError{msg: err.Error()}
	}
	if dev, ok := direct.BlockDeviceOf(dir); ok {
		p.Device, p.LogicalBlock, p.PhysicalBlock = dev.Name, dev.Logical, dev.Physical
	}
	path, err := createTemp(dir, ".dio-check-", tmp)
	if err != nil {
		return p, err
	}
	defer tmp.remove(path)
	r, err := fallback.ProbeFile(path)
	if err != nil {
		return p, err
	}
	p.ODirect, p.ODirectError = r.Direct == nil, errText(r.Direct)
	p.IOURing, p.IOURingError = r.URing == nil, errText(r.URing)
	p.DontCache, p.DontCacheErr = r.DontCache == nil, errText(r.DontCache)
	p.CheckError = errText(r.Check)
	p.Mode, p.Reason = r.Mode.Name(), r.Mode.Reason
	if p.Reason == "" {
		p.Reason = "O_DIRECT accepted, io_uring works"
	}
	if p.ODirect {
		p.measureDirect(path)
	}
	return p, nil
}

// errText is err's text, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// measureDirect opens path with O_DIRECT and reads its alignment, the
// smallest write the kernel itself takes there, and its untorn writes.
func (p *Probe) measureDirect(path string) {
	f, err := direct.Open(path, os.O_RDWR, 0)
	if err != nil {
		p.ODirectError = err.Error()
		return
	}
	defer f.Close()
	a := f.Alignment()
	p.MemAlign, p.OffsetAlign, p.AlignSource = a.Memory, a.Offset, string(f.AlignmentSource())
	l := f.AtomicWrite()
	p.AtomicMin, p.AtomicMax = l.Min, l.Max
	buf, err := aligned.New(2*max(a.Block(), direct.DefaultAlignment), max(a.Memory, direct.DefaultAlignment))
	if err != nil {
		return
	}
	defer buf.Free()
	// Ask the kernel itself, bypassing dio's check.
	for _, n := range candidateAligns {
		if _, err := f.OS().WriteAt(buf.Bytes()[:n], int64(n)); err == nil {
			p.MinWriteAlign = n
			break
		}
	}
}

func printProbes(w io.Writer, probes []Probe) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DIR\tFS\tDEVICE (LBS/PBS)\tO_DIRECT\tALIGN mem/off (source)\tMIN WRITE\tUNTORN\tIO_URING\tMODE")
	for _, p := range probes {
		dev := "-"
		if p.Device != "" {
			dev = fmt.Sprintf("%s (%d/%d)", p.Device, p.LogicalBlock, p.PhysicalBlock)
		}
		align, minw, untorn := "-", "-", "-"
		if p.AtomicMax > 0 {
			untorn = humanize.IBytes(uint64(p.AtomicMin)) + "-" + humanize.IBytes(uint64(p.AtomicMax))
		}
		if p.ODirect {
			align = fmt.Sprintf("%d/%d (%s)", p.MemAlign, p.OffsetAlign, p.AlignSource)
			minw = fmt.Sprint(p.MinWriteAlign)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Dir, p.FS, dev, yesNo(p.ODirect), align, minw, untorn, yesNo(p.IOURing), p.Mode)
	}
	tw.Flush()
	for _, p := range probes {
		fmt.Fprintf(w, "%s: %s: %s\n", p.Dir, p.Mode, p.Reason)
		if p.ODirectError != "" {
			fmt.Fprintf(w, "  O_DIRECT: %s\n", p.ODirectError)
		}
		if p.ODirect && p.AlignSource == string(direct.SourceDefault) && p.MinWriteAlign < p.OffsetAlign {
			fmt.Fprintf(w, "  ALIGN: %s says nothing of its direct-I/O alignment (no statx DIOALIGN, no block device), so dio\n", p.FS)
			fmt.Fprintf(w, "    aligns every transfer to the safe default, %d; MIN WRITE %d is the smallest write the kernel\n", p.OffsetAlign, p.MinWriteAlign)
			fmt.Fprintf(w, "    itself took when asked: %s enforces less than dio assumes\n", p.FS)
		}
		if p.IOURingError != "" {
			fmt.Fprintf(w, "  io_uring: %s\n", p.IOURingError)
		}
		if p.CheckError != "" {
			fmt.Fprintf(w, "  check: %s\n", p.CheckError)
		}
		if p.DontCache {
			fmt.Fprintf(w, "  RWF_DONTCACHE: yes (uncached buffered writes work)\n")
		} else {
			fmt.Fprintf(w, "  RWF_DONTCACHE: no: %s\n", p.DontCacheErr)
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
