package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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

// barWidth is the characters of the live bar between its brackets.
const barWidth = 20

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
}

func newRunProgress(w io.Writer, prefix string, total int) *runProgress {
	live, width := isTerminal(w)
	return &runProgress{w: w, prefix: prefix, live: live, width: width, total: total, start: time.Now(), now: time.Now}
}

// step shows that the next step, described by what, starts.
func (p *runProgress) step(what string) {
	p.n++
	line := fmt.Sprintf("%d/%d %s", p.n, p.total, what)
	left := ""
	if done := p.n - 1; done > 0 {
		mean := p.now().Sub(p.start) / time.Duration(done)
		left = fmt.Sprintf("about %v left", (mean * time.Duration(p.total-done)).Round(time.Second))
	}
	if !p.live {
		if left != "" {
			line += " (" + left + ")"
		}
		fmt.Fprintf(p.w, "%s: %s\n", p.prefix, line)
		return
	}
	filled := barWidth * (p.n - 1) / max(p.total, 1)
	bar := "[" + strings.Repeat("=", filled) + ">" + strings.Repeat(" ", max(barWidth-filled-1, 0)) + "]"
	if left != "" {
		line += ", " + left
	}
	line = p.prefix + ": " + bar + " " + line
	// A line longer than the terminal wraps, and \r then redraws only
	// its last part.
	if p.width > 0 && len(line) >= p.width {
		line = line[:p.width-1]
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
}

// skip drops a step that will not run from the count.
func (p *runProgress) skip() { p.total-- }

// done clears the live line, or ends the lines with how many steps ran
// in how long: the count may stop short of the first total, which does
// not know yet what will be skipped.
func (p *runProgress) done() {
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
		return
	}
	fmt.Fprintf(p.w, "%s: done: %d runs in %v\n", p.prefix, p.n, p.now().Sub(p.start).Round(time.Millisecond))
}
