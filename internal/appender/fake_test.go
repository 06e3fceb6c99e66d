package appender

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
)

// The disk-free test double of the appender's File seam (Neon's
// RecorderWriter): fakeFile keeps the file's bytes in memory and records
// every call that shapes it, and its fakeQueue records every request the
// Appender submits (op, offset, length and a copy of the bytes), so that
// a test asserts on exactly what the Appender asked of the device. A
// request completes at once, or, with hold, only when the Appender waits
// for it (Await) or the queue is full: then full buffers pile up behind
// the "device" as they would behind a slow one.

// request is one request the fake queue was asked to perform.
type request struct {
	op   direct.Op
	off  int64
	n    int
	data []byte // a copy of the bytes to write
}

func (r request) String() string { return fmt.Sprintf("%v %d+%d", r.op, r.off, r.n) }

type fakeFile struct {
	align  direct.Alignment
	direct bool

	data  []byte   // the file's contents; len(data) is its size
	calls []string // Allocate, Truncate, Sync, Close, in order
	q     *fakeQueue

	// Hooks; nil: succeed.
	allocate func(off, n int64) error // before an Allocate takes effect
	truncate func(size int64) error
	fail     func(r request) error // the error of a request, at completion, and of Sync (an OpSync request)
	hold     bool                  // complete requests only on demand
}

func newFake(memory, offset int, direct bool) *fakeFile {
	return &fakeFile{align: alignment(memory, offset), direct: direct}
}

func alignment(memory, offset int) direct.Alignment {
	return direct.Alignment{Memory: memory, Offset: offset}
}

func (f *fakeFile) Alignment() direct.Alignment { return f.align }
func (f *fakeFile) Mode() fallback.Mode         { return fallback.Mode{Direct: f.direct} }

// Name names a directory that does not exist, so copyOnWrite finds no
// filesystem to ask and the Appender grows the file ahead.
func (f *fakeFile) Name() string { return "/nonexistent-dio-fake/dir/file" }

func (f *fakeFile) NewQueue(o *direct.QueueOptions) (direct.Queue, error) {
	f.q = &fakeQueue{f: f, depth: max(1, o.Depth)}
	return f.q, nil
}

func (f *fakeFile) Allocate(off, n int64) error {
	f.calls = append(f.calls, fmt.Sprintf("allocate %d+%d", off, n))
	if f.allocate != nil {
		if err := f.allocate(off, n); err != nil {
			return err
		}
	}
	f.resize(max(int64(len(f.data)), off+n))
	return nil
}

func (f *fakeFile) Truncate(size int64) error {
	f.calls = append(f.calls, fmt.Sprintf("truncate %d", size))
	if f.truncate != nil {
		if err := f.truncate(size); err != nil {
			return err
		}
	}
	f.resize(size)
	return nil
}

func (f *fakeFile) resize(size int64) {
	if size <= int64(len(f.data)) {
		f.data = f.data[:size]
		return
	}
	f.data = append(f.data, make([]byte, size-int64(len(f.data)))...)
}

func (f *fakeFile) Sync() error {
	f.calls = append(f.calls, "sync")
	if f.fail != nil {
		return f.fail(request{op: direct.OpSync})
	}
	return nil
}

func (f *fakeFile) Close() error { f.calls = append(f.calls, "close"); return nil }

func (f *fakeFile) Stat() (os.FileInfo, error) { return fakeInfo(len(f.data)), nil }

func (f *fakeFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(f.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

type fakeInfo int64

func (fi fakeInfo) Name() string       { return "file" }
func (fi fakeInfo) Size() int64        { return int64(fi) }
func (fi fakeInfo) Mode() fs.FileMode  { return 0o600 }
func (fi fakeInfo) ModTime() time.Time { return time.Time{} }
func (fi fakeInfo) IsDir() bool        { return false }
func (fi fakeInfo) Sys() any           { return nil }

// fakeQueue performs requests on its fakeFile in one goroutine.
type fakeQueue struct {
	f       *fakeFile
	depth   int
	reqs    []request
	held    []held // submitted, not yet completed (hold)
	closed  bool
	maxHeld int // the most requests in flight at once
}

type held struct {
	r    request
	c    direct.Completion
	done chan<- direct.Completion
}

func (q *fakeQueue) Submit(r direct.Request) error {
	if q.closed {
		return direct.ErrQueueClosed
	}
	if r.Op == direct.OpWrite && (r.Off%int64(q.f.align.Offset) != 0 || len(r.Buf)%q.f.align.Offset != 0) {
		return fmt.Errorf("fake: write %d+%d: %w", r.Off, len(r.Buf), direct.ErrUnaligned)
	}
	rec := request{op: r.Op, off: r.Off, n: len(r.Buf), data: append([]byte(nil), r.Buf...)}
	q.reqs = append(q.reqs, rec)
	for len(q.held) >= q.depth {
		q.complete() // a full queue waits for its oldest request
	}
	q.held = append(q.held, held{r: rec, c: direct.Completion{Token: r.Token, Op: r.Op, N: len(r.Buf)}, done: r.Done})
	q.maxHeld = max(q.maxHeld, len(q.held))
	if !q.f.hold {
		q.complete()
	}
	return nil
}

// complete performs the oldest request in flight and delivers its
// completion.
func (q *fakeQueue) complete() {
	h := q.held[0]
	q.held = q.held[1:]
	if q.f.fail != nil {
		h.c.Err = q.f.fail(h.r)
	}
	if h.c.Err == nil && h.r.op == direct.OpWrite {
		if end := h.r.off + int64(h.r.n); end > int64(len(q.f.data)) {
			q.f.resize(end) // a write past the end extends the file
		}
		copy(q.f.data[h.r.off:], h.r.data)
	}
	if h.c.Err != nil {
		h.c.N = 0
	}
	h.done <- h.c
}

func (q *fakeQueue) Await(done <-chan direct.Completion) direct.Completion {
	for {
		select {
		case c := <-done:
			return c
		default:
		}
		if len(q.held) == 0 {
			if q.closed {
				return direct.Completion{Err: direct.ErrQueueClosed}
			}
			panic("fake: Await with nothing in flight")
		}
		q.complete()
	}
}

func (q *fakeQueue) Depth() int                { return q.depth }
func (q *fakeQueue) Engine() direct.EngineKind { return direct.EnginePwrite }

func (q *fakeQueue) Close() error {
	for len(q.held) > 0 {
		q.complete()
	}
	q.closed = true
	return nil
}

// writes returns the write requests, in the order they were submitted.
func (q *fakeQueue) writes() []request {
	var ws []request
	for _, r := range q.reqs {
		if r.op == direct.OpWrite {
			ws = append(ws, r)
		}
	}
	return ws
}

// spans returns offset+length of every write request.
func (q *fakeQueue) spans() []string {
	var s []string
	for _, r := range q.writes() {
		s = append(s, fmt.Sprintf("%d+%d", r.off, r.n))
	}
	return s
}
