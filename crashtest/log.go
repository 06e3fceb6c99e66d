//go:build linux

package crashtest

import "sync"

// The kinds of event a recording holds.
type eventKind uint8

const (
	evWrite eventKind = iota // bytes written at an offset (data nil: zeros)
	evFlush                  // the disk's write cache flushed
	evMark                   // the workload acknowledged something
)

// An event is one entry of a recording, in the order the disk saw it.
type event struct {
	kind eventKind
	off  int64
	n    int
	data []byte
}

// A recording is the log of one disk's writes and flushes and the marks
// the workload made between them.
type recording struct {
	mu     sync.Mutex
	events []event
}

func (r *recording) write(off int64, p []byte) {
	r.add(event{kind: evWrite, off: off, n: len(p), data: append([]byte(nil), p...)})
}

func (r *recording) zero(off, n int64) {
	r.add(event{kind: evWrite, off: off, n: int(n)})
}

func (r *recording) flush() { r.add(event{kind: evFlush}) }

func (r *recording) mark(p []byte) {
	r.add(event{kind: evMark, data: append([]byte(nil), p...)})
}

func (r *recording) add(e event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// snapshot returns the events so far.
func (r *recording) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.events[:len(r.events):len(r.events)]
}
