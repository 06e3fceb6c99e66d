package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/cmd/dio-check/internal/ingest"
	"github.com/dio-storage/dio/internal/testenv"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"134217728", 128 << 20},
		{"128MiB", 128 << 20},
		{"128Mi", 128 << 20},
		{"128mib", 128 << 20},
		{"128MB", 128_000_000}, // go-humanize: MB is 10^6
		{"128M", 128_000_000},
		{"1.5GiB", 3 << 29},
		{"1.5MiB", 3 << 19},
		{"64KiB", 64 << 10},
		{"64k", 64_000},
		{"64 KiB", 64 << 10},
		{"4096", 4096},
		{"100B", 100},
		{"8EiB", 0}, // 2^63: past an int64
		{"9223372036854775807", 1<<63 - 1},
		{"9223372036854775808", 0},
		{"16EiB", 0}, // 2^64: past a uint64
		{"9999999999GiB", 0},
		{"", 0},
		{"lots", 0},
		{"0", 0},
		{"0MiB", 0},
		{"-1", 0},
		{"12parsecs", 0},
		// Whole bytes only, worked out exactly: go-humanize alone cuts
		// 1.5 to 1 and 1.3KiB (1331.2 bytes) to 1331.
		{"1.5", 0},
		{"1.5B", 0},
		{"0.5", 0},
		{"1.3KiB", 0},
		{"0.1KiB", 0},
		{"0.5KiB", 512},
		{"1.5k", 1500},
		{"4.35MB", 4_350_000},
		{"1.000", 1},
		{"8.0EiB", 0},
	} {
		got, err := parseSize(c.in)
		if c.want == 0 {
			assert.Error(t, err, "%q gave %d", c.in, got)
			continue
		}
		if assert.NoError(t, err, "%q", c.in) {
			assert.Equal(t, c.want, got, "%q", c.in)
		}
	}
	_, err := parseSize("9999999999GiB")
	assert.EqualError(t, err, "too large")
	_, err = parseSize("1.5")
	assert.EqualError(t, err, "not a whole number of bytes")
	_, err = parseSize("1.3KiB")
	assert.EqualError(t, err, "1.3KiB is 1331.2 bytes, not a whole number")
}

func TestSizeName(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0"},
		{100, "100B"},
		{1023, "1023B"},
		{8 << 10, "8KiB"},
		{64_000, "62.5KiB"},
		{600 << 20, "600MiB"},
		{246104 << 10, "240.3MiB"}, // not "246104KiB"
		{1 << 30, "1GiB"},
		{3 << 29, "1.5GiB"},
	} {
		assert.Equal(t, c.want, sizeName(c.n), "%d", c.n)
	}
	// What the flags print, they take back.
	for _, n := range []int64{100, 8 << 10, 600 << 20, 3 << 30, 512} {
		got, err := parseSize(sizeName(n))
		require.NoError(t, err)
		assert.Equal(t, n, got)
	}
}

func TestParseFlagsInterspersed(t *testing.T) {
	for _, c := range []struct {
		args     []string
		operands []string
		json     bool
		size     int64
	}{
		{[]string{"/a"}, []string{"/a"}, false, 1},
		{[]string{"-json", "/a"}, []string{"/a"}, true, 1},
		{[]string{"/a", "-json"}, []string{"/a"}, true, 1},
		{[]string{"/a", "-size", "16MiB", "/b", "-json"}, []string{"/a", "/b"}, true, 16 << 20},
		// A flag's value is never an operand, even when it looks like one.
		{[]string{"-size", "2", "/a"}, []string{"/a"}, false, 2},
		{[]string{"/a", "--size=3", "/b"}, []string{"/a", "/b"}, false, 3},
		// After "--", everything is an operand.
		{[]string{"/a", "--", "-json", "/b"}, []string{"/a", "-json", "/b"}, false, 1},
		{[]string{"-json", "--", "-size"}, []string{"-size"}, true, 1},
		{[]string{"-json", "--", "/a", "--"}, []string{"/a", "--"}, true, 1},
		{nil, nil, false, 1},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		asJSON := fs.Bool("json", false, "")
		size := sizeValue(1)
		fs.Var(&size, "size", "")
		var stdout bytes.Buffer
		got, err := parseFlags(fs, c.args, &stdout, func(w io.Writer) {})
		require.NoError(t, err, "%q", c.args)
		assert.Equal(t, c.operands, got, "%q", c.args)
		assert.Equal(t, c.json, *asJSON, "%q", c.args)
		assert.Equal(t, c.size, int64(size), "%q", c.args)
	}

	fs := flag.NewFlagSet("dio-check bench", flag.ContinueOnError)
	fs.Bool("json", false, "")
	_, err := parseFlags(fs, []string{"/a", "-nope"}, &bytes.Buffer{}, func(w io.Writer) {})
	var ue usageError
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, ue.msg, "-nope")
	assert.Equal(t, "usage: dio-check bench [-json] DIR", ue.synopsis)
	var stdout bytes.Buffer
	_, err = parseFlags(fs, []string{"/a", "-h"}, &stdout, func(w io.Writer) { fmt.Fprint(w, "the usage") })
	assert.ErrorIs(t, err, errHelp)
	assert.Equal(t, "the usage", stdout.String())

	// help, as an operand, asks for the usage too; after "--" it is a
	// directory.
	stdout.Reset()
	_, err = parseFlags(fs, []string{"/a", "help", "-json"}, &stdout, func(w io.Writer) { fmt.Fprint(w, "the usage") })
	assert.ErrorIs(t, err, errHelp)
	assert.Equal(t, "the usage", stdout.String())
	stdout.Reset()
	got, err := parseFlags(fs, []string{"/a", "--", "help"}, &stdout, func(w io.Writer) { fmt.Fprint(w, "the usage") })
	require.NoError(t, err)
	assert.Equal(t, []string{"/a", "help"}, got)
	assert.Empty(t, stdout.String())
}

// TestHelp checks that every way of asking for usage prints it on stdout,
// nothing on stderr, and exits 0, as Go's flag convention has it.
func TestHelp(t *testing.T) {
	bench, _ := benchFlags()
	pressure, _ := pressureFlags()
	probe, _ := probeFlags()
	for _, c := range []struct {
		args []string
		fs   *flag.FlagSet // whose every flag the usage lists
	}{
		{[]string{"-h"}, probe},
		{[]string{"-help"}, probe},
		{[]string{"--help"}, probe},
		{[]string{"help"}, probe},
		{[]string{"/tmp", "-h"}, probe},
		{[]string{"bench", "-h"}, bench},
		{[]string{"bench", "/tmp", "-help"}, bench},
		{[]string{"help", "bench"}, bench},
		{[]string{"pressure", "-h"}, pressure},
		{[]string{"help", "pressure"}, pressure},
		// help after a command, as a word rather than a flag.
		{[]string{"bench", "help"}, bench},
		{[]string{"bench", "-json", "help"}, bench},
		{[]string{"pressure", "help"}, pressure},
		{[]string{"pressure", "/tmp", "help"}, pressure},
		{[]string{"/tmp", "help"}, probe},
	} {
		stdout, stderr, code := dioCheck(t, c.args...)
		assert.Equal(t, 0, code, "%q", c.args)
		assert.Empty(t, stderr, "%q", c.args)
		assert.Contains(t, stdout, "usage: "+c.fs.Name()+" [", "%q", c.args)
		c.fs.VisitAll(func(f *flag.Flag) {
			// Once in the synopsis, once in the list of flags.
			assert.Regexp(t, `\[-`+f.Name+`[ =\]]`, stdout, "%q: -%s in the synopsis", c.args, f.Name)
			assert.Regexp(t, `(?m)^  -`+f.Name+`\b`, stdout, "%q: -%s in the flags", c.args, f.Name)
		})
	}
	stdout, _, _ := dioCheck(t, "help")
	for _, want := range []string{"dio-check bench [", "dio-check pressure [", "dio-check help", "130 on SIGINT", "143 on SIGTERM", "128MB is 128000000 bytes"} {
		assert.Contains(t, stdout, want)
	}
	for _, want := range []string{"-depth", "-fio", "-workload", "-duration", "-runs"} {
		assert.Contains(t, stdout, want, "the bench's synopsis")
	}

	_, stderr, code := dioCheck(t, "help", "nope")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "help nope")
}

// TestBadFlagOnce checks that a flag error is printed once, on stderr,
// with the synopsis after it, and exits 2.
func TestBadFlagOnce(t *testing.T) {
	dir := testenv.Dir(t)
	for _, args := range [][]string{{"-nope", dir}, {dir, "-nope"}, {"bench", "-nope", dir}, {"pressure", dir, "-nope"}} {
		stdout, stderr, code := dioCheck(t, args...)
		assert.Equal(t, 2, code, "%q", args)
		assert.Empty(t, stdout, "%q", args)
		assert.Equal(t, 1, strings.Count(stderr, "flag provided but not defined: -nope"), "%q: %s", args, stderr)
		assert.Equal(t, 1, strings.Count(stderr, "usage: "), "%q: %s", args, stderr)
		assert.True(t, strings.HasPrefix(stderr, "dio-check: flag provided"), "%q: the error comes first: %s", args, stderr)
		requireHintWorks(t, args, stderr)
	}
	// A bad value for a flag, or from the help command, likewise.
	for _, args := range [][]string{{"bench", "-size", "1.5", dir}, {"pressure", "-memory", "lots", dir}, {"help", "nope"}} {
		_, stderr, code := dioCheck(t, args...)
		assert.Equal(t, 2, code, "%q", args)
		requireHintWorks(t, args, stderr)
	}
	testenv.RequireEmpty(t, dir)
}

// requireHintWorks checks the hint that ends the stderr of the command
// line args, refused: it names the command's own help (dio-check bench's,
// not dio-check's), and each command it names prints that usage on
// stdout and exits 0.
func requireHintWorks(t *testing.T, args []string, stderr string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	hint := lines[len(lines)-1]
	cmds := regexp.MustCompile(`'dio-check ?([^']*)'`).FindAllStringSubmatch(hint, -1)
	require.NotEmpty(t, cmds, "%q: no command in the hint %q", args, hint)
	want := "usage: dio-check ["
	if args[0] == "bench" || args[0] == "pressure" {
		want = "usage: dio-check " + args[0] + " ["
	}
	for _, c := range cmds {
		stdout, stderr, code := dioCheck(t, strings.Fields(c[1])...)
		assert.Equal(t, 0, code, "%q: %q: %s", args, c[0], stderr)
		assert.Contains(t, stdout, want, "%q: %q prints another command's usage", args, c[0])
	}
}

func TestInterspersedFlags(t *testing.T) {
	dir := testenv.Dir(t)
	out, stderr, code := dioCheck(t, dir, "-json")
	require.Equal(t, 0, code, stderr)
	var p Probe
	require.NoError(t, json.Unmarshal([]byte(out), &p), out)
	assert.Equal(t, dir, p.Dir)

	out, stderr, code = dioCheck(t, "bench", dir, "-json", "-workload", "seq-no-delta", "-size", "1.5MiB", "-value", "1KiB", "-buffers", "64KiB", "-fio=false")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.NotEmpty(t, lines)
	for _, l := range lines {
		var r BenchResult
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		assert.Equal(t, int64(3<<19), r.Bytes, "-size 1.5MiB")
		assert.Equal(t, 1024, r.ValueSize, "-value 1KiB")
		assert.Equal(t, 64<<10, r.Buffer)
	}
	testenv.RequireEmpty(t, dir)
}

// TestSizeFlags checks that every size flag takes what people write and
// that a bad or overflowing one is refused naming that flag, not another.
func TestSizeFlags(t *testing.T) {
	dir := testenv.Dir(t)
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"bench", "-size", "9999999999GiB", dir}, "-size"},
		{[]string{"bench", "-value", "9999999999GiB", dir}, "-value"},
		{[]string{"bench", "-value", "2MiB", dir}, "-value"},
		{[]string{"bench", "-buffers", "8KiB,9999999999GiB", dir}, "-buffers"},
		{[]string{"bench", "-buffers", "4GiB", dir}, "-buffers"},
		{[]string{"pressure", "-memory", "9999999999GiB", dir}, "-memory"},
		{[]string{"pressure", "-hot", "9999999999GiB", dir}, "-hot"},
		{[]string{"pressure", "-hot", "16EiB", dir}, "-hot"},
		// A fraction of a byte, which go-humanize cuts to a whole one
		// (-size 1.5 was 1 byte, and then -value took the blame).
		{[]string{"bench", "-size", "1.5", dir}, "-size"},
		{[]string{"bench", "-value", "1.5", dir}, "-value"},
		{[]string{"bench", "-buffers", "8KiB,1.5", dir}, "-buffers"},
		{[]string{"bench", "-buffers", "8.0001KiB", dir}, "-buffers"},
		{[]string{"pressure", "-memory", "1.5", dir}, "-memory"},
		{[]string{"pressure", "-memory", "256.0001MiB", dir}, "-memory"},
		{[]string{"pressure", "-hot", "32.00001MiB", dir}, "-hot"},
	} {
		// Small runs first, which the flag tried overrides: should a
		// size be taken, the run it starts is short.
		small := map[string][]string{
			"bench":    {"-size", "4MiB", "-duration", "20ms", "-runs", "1", "-fio=false", "-workload", "seq-no-delta"},
			"pressure": {"-seconds", "1", "-hot", "32MiB", "-memory", "256MiB", "-engines", "std-fs"},
		}[c.args[0]]
		stdout, stderr, code := dioCheck(t, slices.Concat(c.args[:1], small, c.args[1:])...)
		assert.Equal(t, 2, code, "%q", c.args)
		assert.Empty(t, stdout, "%q", c.args)
		// The first line names the flag that was wrong, first.
		assert.Regexp(t, `^dio-check: (invalid value "[^"]*" for flag )?`+c.flag+`[ :]`, stderr, "%q", c.args)
		if strings.Contains(c.args[2], ".") { // the value
			assert.Contains(t, stderr, "not a whole number", "%q", c.args)
		}
	}
	testenv.RequireEmpty(t, dir)
}

// TestProbeSeveralDirs checks that the probe goes through the directories
// in order, one that cannot be probed hiding none of the others: under
// -json an object per directory, the result or the error; else a table
// row per good one and a line on stderr per bad one; exit 2 after all.
func TestProbeSeveralDirs(t *testing.T) {
	dir := testenv.Dir(t)
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	missing := filepath.Join(dir, "missing")
	for _, reqFlag := range [][]string{nil, {"-require", "direct"}} {
		args := append(slices.Clone(reqFlag), "-json", dir, missing, file, dir)
		stdout, stderr, code := dioCheck(t, args...)
		assert.Equal(t, 2, code, "%q: a directory could not be probed, which exit 2 says before an unmet -require", args)
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		require.Len(t, lines, 4, "%q: an object per directory: %s", args, stdout)
		var reasons []string
		for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
			if !strings.Contains(l, "would not get O_DIRECT") {
				reasons = append(reasons, strings.TrimPrefix(l, "dio-check: "))
			}
		}
		require.Len(t, reasons, 2, "%q: a line per bad directory: %s", args, stderr)
		for i, want := range []string{dir, missing, file, dir} {
			var obj map[string]any
			require.NoError(t, json.Unmarshal([]byte(lines[i]), &obj), lines[i])
			assert.Equal(t, want, obj["dir"], "%q: object %d", args, i)
			if i == 1 || i == 2 {
				assert.Equal(t, map[string]any{"dir": want, "error": reasons[i-1]}, obj, "%q", args)
			} else {
				assert.Contains(t, obj, "mode", "%q: a probe", args)
			}
		}
		assert.Equal(t, len(reqFlag) > 0 && testenv.RejectsDirect(), strings.Contains(stderr, dir+" would not get O_DIRECT"), "%q: %s", args, stderr)
	}

	// Without -json: a table row per good directory, a line per bad one.
	stdout, stderr, code := dioCheck(t, missing, dir, file)
	assert.Equal(t, 2, code)
	assert.Regexp(t, `^DIR `, stdout)
	assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(dir)+` +\S+ `, stdout, "a row for %s", dir)
	assert.NotContains(t, stdout, missing)
	assert.NotContains(t, stdout, file)
	assert.Equal(t, "dio-check: stat "+missing+": no such file or directory\ndio-check: "+file+": not a directory\n", stderr)

	// Nothing that could be probed: no table, only the reasons.
	stdout, stderr, code = dioCheck(t, missing, file)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, 2, strings.Count(stderr, "\n"), stderr)

	require.NoError(t, os.Remove(file))
	testenv.RequireEmpty(t, dir)
}

// TestDirErrorJSON checks that bench and pressure, like the probe, print
// an object with the directory and the error under -json for a directory
// they cannot use, as well as the one-line reason on stderr, and exit 2.
func TestDirErrorJSON(t *testing.T) {
	dir := testenv.Dir(t)
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, bad := range []string{filepath.Join(dir, "missing"), file} {
		for _, cmd := range [][]string{
			{"-json"},
			{"bench", "-json", "-size", "4MiB", "-duration", "20ms", "-runs", "1", "-fio=false"},
			{"pressure", "-json", "-seconds", "1", "-hot", "32MiB", "-memory", "256MiB"},
		} {
			requireDirError(t, append(cmd, bad), bad)
		}
	}
	require.NoError(t, os.Remove(file))
	testenv.RequireEmpty(t, dir)
}

// requireDirError runs dio-check with args, which name dir, a directory
// it cannot use, and -json: exit 2, the reason in one line on stderr, and
// on stdout one object with dir and that reason.
func requireDirError(t *testing.T, args []string, dir string) {
	t.Helper()
	stdout, stderr, code := dioCheck(t, args...)
	assert.Equal(t, 2, code, "%q", args)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "%q: one line on stderr: %s", args, stderr)
	var e map[string]any
	if assert.NoError(t, json.Unmarshal([]byte(stdout), &e), "%q: %s", args, stdout) {
		assert.Equal(t, map[string]any{"dir": dir, "error": strings.TrimSpace(strings.TrimPrefix(stderr, "dio-check: "))}, e, "%q", args)
	}
}

// TestBenchProgressPiped checks that a bench whose stderr is a pipe says,
// a line per run, how far along it is, and from the second run how long
// is left.
func TestBenchProgressPiped(t *testing.T) {
	dir := testenv.Dir(t)
	_, stderr, code := dioCheck(t, "bench", "-workload", "seq-no-delta,seq", "-size", "1MiB", "-buffers", "64KiB", "-runs", "2", "-fio=false", dir)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "\r", "no live line into a pipe")
	line := regexp.MustCompile(`^dio-check bench: (\d+)/(\d+) (seq-no-delta|seq), 64KiB buffers, \S+, round [12]/2( \(about \d+[a-zµ.0-9]* left\))?$`)
	last := regexp.MustCompile(`^dio-check bench: done: (\d+) runs in [0-9.]+m?s$`)
	n, total, prev, ended := 0, 0, 0, false
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.HasPrefix(l, "dio-check: skipped") {
			continue
		}
		require.False(t, ended, "a line after the last: %q", l)
		if m := last.FindStringSubmatch(l); m != nil {
			assert.Equal(t, strconv.Itoa(n), m[1], l)
			ended = true
			continue
		}
		m := line.FindStringSubmatch(l)
		require.NotNil(t, m, "%q", l)
		k, _ := strconv.Atoi(m[1])
		total, _ = strconv.Atoi(m[2])
		n++
		assert.Equal(t, n, k, l)
		assert.LessOrEqual(t, k, total, l)
		if prev > 0 {
			assert.LessOrEqual(t, total, prev, "the total only falls, as engines are skipped: %q", l)
		}
		prev = total
		assert.Equal(t, k > 1, m[4] != "", "the time left, from the second run: %q", l)
	}
	assert.True(t, ended, "the last line says how many ran: %s", stderr)
	// 2 rounds × 2 workloads × 1 buffer × the engines that ran, and one
	// try of each engine skipped.
	skipped := strings.Count(stderr, "dio-check: skipped ")
	assert.Equal(t, 2*2*(len(ingest.Engines())-skipped)+skipped, n, stderr)
	testenv.RequireEmpty(t, dir)
}

// TestRunProgressLive checks the terminal's line: redrawn in place, with
// the bar, the count and the time left, and cut to the terminal's width
// from the step's description, so that the count and the time left stay.
func TestRunProgressLive(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	p := newRunProgress(&out, "dio-check bench", slices.Repeat([]stepCost{{bytes: 8 << 20}}, 5))
	p.live, p.width, p.start, p.now = true, 200, now, func() time.Time { return now }
	mb := stepCost{bytes: 8 << 20}
	p.step("seq, 8KiB buffers, std-fs", mb)
	assert.Equal(t, "\r\033[Kdio-check bench: [>                   ] 1/5 seq, 8KiB buffers, std-fs", out.String())
	out.Reset()
	now = now.Add(10 * time.Second)
	p.step("seq, 8KiB buffers, std-fs+fsync", mb)
	assert.Equal(t, "\r\033[Kdio-check bench: [====>               ] 2/5 seq, 8KiB buffers, std-fs+fsync, about 40s left", out.String())
	p.skip(mb)
	out.Reset()
	now = now.Add(10 * time.Second)

	// 80 columns: the bar shrinks to its least, then the description
	// loses its middle, by runes (never inside the 2-byte ×), and keeps
	// its end: the engine and the round.
	p.width = 80
	before := *p
	p.step("read: ReadBlob ×16, direct+io_uring, round 3/3", mb)
	line := strings.TrimPrefix(out.String(), "\r\033[K")
	assert.Equal(t, "dio-check bench: [=====>    ] 3/4 read: Rea…io_uring, round 3/3, about 20s left", line)
	assert.Equal(t, 79, utf8.RuneCountInString(line), "one short of the width")
	for _, w := range []int{66, 65, 60, 45, 30} {
		out.Reset()
		*p = before
		p.width = w
		p.step("read: ReadBlob ×16, direct+io_uring, round 3/3", mb)
		line := strings.TrimPrefix(out.String(), "\r\033[K")
		assert.True(t, utf8.ValidString(line), "%d columns: %q", w, line)
		assert.LessOrEqual(t, utf8.RuneCountInString(line), w-1, "%d columns: %q", w, line)
		if w >= 60 {
			assert.Contains(t, line, "3/4", "%d columns: the count", w)
			assert.True(t, strings.HasSuffix(line, "about 20s left"), "%d columns: the time left: %q", w, line)
		}
	}

	// Output to stdout on the same terminal goes above the bar, on a line
	// of its own, and the bar comes back below it.
	out.Reset()
	*p = before
	p.width = 200
	p.step("seq, 8KiB buffers, direct+pwrite", mb)
	bar := out.String()
	out.Reset()
	require.NoError(t, p.above(func() error { _, err := out.WriteString("{}\n"); return err }))
	assert.Equal(t, "\r\033[K{}\n"+bar, out.String())

	out.Reset()
	p.done()
	assert.Equal(t, "\r\033[K", out.String())
	out.Reset()
	require.NoError(t, p.above(func() error { _, err := out.WriteString("{}\n"); return err }))
	assert.Equal(t, "{}\n", out.String(), "no bar to clear or redraw after done")
}

// TestRunProgressEstimate: the time left weighs the steps to come by
// what they cost, so that quick ingest rows before a large blob file and
// one-second read rows do not make it a fraction of the truth (issue 24:
// "about 7s" left at 6.9 s of a bench that ended at 29.9 s).
func TestRunProgressEstimate(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	ingestRow, file, read := stepCost{bytes: 8 << 20}, stepCost{bytes: 256 << 20}, stepCost{timed: time.Second}
	plan := slices.Repeat([]stepCost{ingestRow}, 10)
	plan = append(plan, file)
	plan = append(plan, slices.Repeat([]stepCost{read}, 20)...)
	p := newRunProgress(&out, "dio-check bench", plan)
	p.live, p.start, p.now = false, now, func() time.Time { return now }
	lastLeft := func() string {
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		l := lines[len(lines)-1]
		i := strings.LastIndex(l, "(about ")
		if i < 0 {
			return ""
		}
		return strings.TrimSuffix(l[i+len("(about "):], " left)")
	}
	p.step("ingest", ingestRow)
	assert.NotContains(t, out.String(), "about", "no estimate before a step has finished")
	now = now.Add(100 * time.Millisecond)
	for range 9 {
		p.step("ingest", ingestRow)
		now = now.Add(100 * time.Millisecond)
	}
	// 10 rows of 8 MiB in 1 s: the 256 MiB file at that pace, 3.2 s, and
	// 20 read rows of a second each.
	p.step("file", file)
	assert.Equal(t, "23s", lastLeft())
	now = now.Add(3200 * time.Millisecond)
	p.step("read", read)
	assert.Equal(t, "20s", lastLeft(), "the read rows' planned length before any has run")
	// The read rows take 1.5 s each (dropping the cache, opening): the
	// estimate follows them.
	for range 10 {
		now = now.Add(1500 * time.Millisecond)
		p.step("read", read)
	}
	assert.Equal(t, "15s", lastLeft(), "10 rows to go at 1.5 s")
	p.done()
	assert.Contains(t, out.String(), "done: 22 runs in")

	// Skipped steps leave the estimate.
	out.Reset()
	now = time.Unix(0, 0)
	p = newRunProgress(&out, "dio-check bench", []stepCost{ingestRow, ingestRow, read, read})
	p.live, p.start, p.now = false, now, func() time.Time { return now }
	p.step("ingest", ingestRow)
	now = now.Add(time.Second)
	p.skip(ingestRow)
	p.skip(read)
	p.step("read", read)
	assert.Equal(t, "1s", lastLeft())
}

// TestDocsListFlags checks that the package doc and docs/dio-check.md
// (the README's was moved there) show each command's synopsis as the
// FlagSets generate it, so that neither omits a flag or keeps one that is
// gone, and that docs/dio-check.md lists every exit status.
func TestDocsListFlags(t *testing.T) {
	doc, err := os.ReadFile("main.go")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "dio-check.md"))
	require.NoError(t, err)
	probe, _ := probeFlags()
	bench, _ := benchFlags()
	pressure, _ := pressureFlags()
	for _, fs := range []*flag.FlagSet{probe, bench, pressure} {
		line := strings.TrimPrefix(synopsis(fs), "usage: ")
		assert.Contains(t, string(doc), "//\t"+line+"\n", "the package doc")
		assert.Contains(t, string(readme), line+"\n", "the README")
	}
	// The exit statuses, in the README's table (issue 16: 130 was
	// missing); TestHelp checks dio-check help's list.
	for _, code := range []int{0, 1, 2, 130, 143} {
		assert.Regexp(t, fmt.Sprintf(`(?m)^\| %d \| \S`, code), string(readme), "the README's exit status %d", code)
	}
}
