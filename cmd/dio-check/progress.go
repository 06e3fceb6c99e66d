package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal, where progress is one line
// redrawn in place, and its width (0: unknown).
func isTerminal(w io.Writer) (bool, int) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		width = 0
	}
	return true, width
}

// barWidth is the characters of the live bar between its brackets, and
// minBarWidth what it shrinks to on a narrow terminal.
const barWidth, minBarWidth = 20, 10

// runProgress shows how far a run of steps (the bench's runs) has come, on
// stderr: on a terminal a live bar with the count and the time left, else
// a line per step, so that a run through make or CI is never silent for
// long.
//
// The time left comes from what each step to go is expected to cost
// (stepCost), not from the mean step so far: the bench's steps differ
// by an order of magnitude (an 8 MiB ingest row takes 0.1 s, writing the
// read workload's 256 MiB blob file several seconds, and each read row
// its -duration), and a mean over the quick ingest rows said "about 7s
// left" at 6.9 s of a bench that ended at 29.9 s. A step that writes
// bytes is expected to take them at the pace the byte steps before it
// wrote theirs; a timed step as long as the timed steps before it took,
// or its planned length before any has run.
type runProgress struct {
	w      io.Writer
	prefix string // "dio-check bench"
	live   bool
	width  int
	total  int // steps, less those skipped
	n      int // steps started
	start  time.Time
	now    func() time.Time
	line   string // the live line drawn last, to redraw after output

	left      stepCosts // what the steps not yet started will cost
	cur       stepCost  // the step running
	curStart  time.Time
	bytesDone stepTally // byte steps finished
	timedDone stepTally // timed steps finished
}

// A stepCost is what a step is expected to cost: Bytes written or read,
// whose time scales with the pace of the byte steps before it, or, for a
// step that runs for a set time (a read row), Timed.
type stepCost struct {
	bytes int64
	timed time.Duration
}

// stepCosts sums the costs of steps to come.
type stepCosts struct {
	bytes int64
	timed time.Duration
	nTime int // timed steps
}

func (c *stepCosts) add(s stepCost, sign int) {
	c.bytes += int64(sign) * s.bytes
	c.timed += time.Duration(sign) * s.timed
	if s.timed > 0 {
		c.nTime += sign
	}
}

// stepTally is how many finished steps of a kind cost what, and took how
// long.
type stepTally struct {
	n       int
	units   int64 // bytes, or planned nanoseconds
	elapsed time.Duration
}

func newRunProgress(w io.Writer, prefix string, plan []stepCost) *runProgress {
	live, width := isTerminal(w)
	p := &runProgress{w: w, prefix: prefix, live: live, width: width, total: len(plan), start: time.Now(), now: time.Now}
	for _, c := range plan {
		p.left.add(c, 1)
	}
	return p
}

// finishStep books the step running, if any, as done.
func (p *runProgress) finishStep(now time.Time) {
	if p.n == 0 {
		return
	}
	took := now.Sub(p.curStart)
	switch {
	case p.cur.timed > 0:
		p.timedDone.n++
		p.timedDone.units += int64(p.cur.timed)
		p.timedDone.elapsed += took
	case p.cur.bytes > 0:
		p.bytesDone.n++
		p.bytesDone.units += p.cur.bytes
		p.bytesDone.elapsed += took
	}
}

// estimate returns the time the steps from the one starting (cur, already
// taken off left) onward will take, and false while it cannot tell: no
// byte step has finished and bytes are still to come.
func (p *runProgress) estimate(cur stepCost) (time.Duration, bool) {
	todo := p.left
	todo.add(cur, 1)
	var est time.Duration
	if todo.bytes > 0 {
		if p.bytesDone.units == 0 {
			return 0, false
		}
		est += time.Duration(float64(p.bytesDone.elapsed) * float64(todo.bytes) / float64(p.bytesDone.units))
	}
	if todo.timed > 0 {
		if p.timedDone.units > 0 {
			// As long, per planned second, as the timed steps so far
			// (a read row also drops the page cache and opens a Reader).
			est += time.Duration(float64(p.timedDone.elapsed) * float64(todo.timed) / float64(p.timedDone.units))
		} else {
			est += todo.timed
		}
	}
	return est, true
}

// step shows that the next step, described by what and expected to cost
// c, starts.
func (p *runProgress) step(what string, c stepCost) {
	now := p.now()
	p.finishStep(now)
	p.left.add(c, -1)
	p.cur, p.curStart = c, now
	p.n++
	count := fmt.Sprintf("%d/%d", p.n, p.total)
	left := ""
	if est, ok := p.estimate(c); ok && p.n > 1 {
		left = fmt.Sprintf("about %v left", est.Round(time.Second))
	}
	if !p.live {
		line := count + " " + what
		if left != "" {
			line += " (" + left + ")"
		}
		fmt.Fprintf(p.w, "%s: %s\n", p.prefix, line)
		return
	}
	tail := ""
	if left != "" {
		tail = ", " + left
	}
	// A line longer than the terminal wraps, and \r then redraws only its
	// last part. So on a narrow terminal the bar shrinks first, to
	// minBarWidth, then what the step is loses its middle (its end names
	// the engine and the round), so that the count and the time left stay
	// in view.
	bw := barWidth
	fixed := utf8.RuneCountInString(p.prefix + ": [] " + count + " " + tail)
	if p.width > 0 {
		bw = min(barWidth, max(minBarWidth, p.width-1-fixed-utf8.RuneCountInString(what)))
	}
	filled := bw * (p.n - 1) / max(p.total, 1)
	bar := "[" + strings.Repeat("=", filled) + ">" + strings.Repeat(" ", max(bw-filled-1, 0)) + "]"
	p.line = fitLine(p.prefix+": "+bar+" "+count+" ", what, tail, p.width)
	fmt.Fprintf(p.w, "\r\033[K%s", p.line)
}

// fitLine returns head+what+tail as a live line on a terminal of width
// columns (0: unknown, then all of it): one short of the width, for a
// line as long as the terminal wraps, and \r then redraws only its last
// part. What goes first is the middle of what (its start and its end
// say most), then all of it and the ", " that starts tail, so that head
// and tail stay in view; then the end of tail.
func fitLine(head, what, tail string, width int) string {
	room := width - 1 - utf8.RuneCountInString(head+tail)
	if width > 0 && utf8.RuneCountInString(what) > room {
		whole := []rune(what)
		what = ""
		if room > 1 {
			keep := (room - 1) / 3
			what = string(whole[:keep]) + "…" + string(whole[len(whole)-(room-1-keep):])
		} else {
			tail = strings.TrimPrefix(tail, ", ")
		}
	}
	return cut(head+what+tail, width-1)
}

// cut returns the first n runes of s, never part of one (a width of 0,
// unknown, makes n negative: then all of s).
func cut(s string, n int) string {
	if n < 0 {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// above runs write, which prints to stdout, with the live line cleared
// first and drawn again after, so that output to the same terminal (-json)
// starts on a line of its own and the bar stays below it.
func (p *runProgress) above(write func() error) error {
	if !p.live || p.line == "" {
		return write()
	}
	fmt.Fprint(p.w, "\r\033[K")
	err := write()
	fmt.Fprintf(p.w, "\r\033[K%s", p.line)
	return err
}

// skip drops a step that will not run, expected to cost c, from the
// count and the time left.
func (p *runProgress) skip(c stepCost) {
	p.total--
	p.left.add(c, -1)
}

// done clears the live line, or ends the lines with how many steps ran
// in how long: the count may stop short of the first total, which does
// not know yet what will be skipped.
func (p *runProgress) done() {
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
		p.line = ""
		return
	}
	fmt.Fprintf(p.w, "%s: done: %d runs in %v\n", p.prefix, p.n, p.now().Sub(p.start).Round(time.Millisecond))
}
