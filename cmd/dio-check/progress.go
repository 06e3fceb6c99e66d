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
// long. The time left is the mean step so far times the steps to go.
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
}

func newRunProgress(w io.Writer, prefix string, total int) *runProgress {
	live, width := isTerminal(w)
	return &runProgress{w: w, prefix: prefix, live: live, width: width, total: total, start: time.Now(), now: time.Now}
}

// step shows that the next step, described by what, starts.
func (p *runProgress) step(what string) {
	p.n++
	count := fmt.Sprintf("%d/%d", p.n, p.total)
	left := ""
	if done := p.n - 1; done > 0 {
		mean := p.now().Sub(p.start) / time.Duration(done)
		left = fmt.Sprintf("about %v left", (mean * time.Duration(p.total-done)).Round(time.Second))
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

// skip drops a step that will not run from the count.
func (p *runProgress) skip() { p.total-- }

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
