package direct

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/dio-storage/dio/aligned"
)

// Op is the operation of a Request.
type Op uint8

// The operations a Queue performs.
const (
	OpWrite Op = iota + 1 // write Buf at Off, whole
	OpRead                // read into Buf at Off; a short count only at the end of the file
	OpSync                // fdatasync; covers the writes completed before it was submitted
)

// names is the one table of an Op's names: String's, and the operation
// that errors name, as os.PathError's Op: the system call on the pwrite
// engine and in File's own methods ("pwrite"), the io_uring opcode on
// the io_uring engine ("io_uring write"), so that an error says what
// the engine actually did.
func (o Op) names() (name, call, uring string) {
	switch o {
	case OpWrite:
		return "write", "pwrite", "io_uring write"
	case OpRead:
		return "read", "pread", "io_uring read"
	case OpSync:
		return "fdatasync", "fdatasync", "io_uring fdatasync"
	case OpTruncate:
		return "truncate", "ftruncate", "ftruncate"
	case OpSyncDir:
		return "fsync-dir", "fsync", "fsync"
	}
	s := fmt.Sprintf("Op(%d)", uint8(o))
	return s, s, s
}

func (o Op) String() string {
	name, _, _ := o.names()
	return name
}

// syscall names the operation in the errors of File's methods and the
// pwrite engine.
func (o Op) syscall() string {
	_, call, _ := o.names()
	return call
}

// uringOp names the operation in the io_uring engine's errors.
func (o Op) uringOp() string {
	_, _, uring := o.names()
	return uring
}

// A Request is one asynchronous operation. Buf belongs to the queue from
// Submit until its Completion is received: the caller must neither touch it
// nor let its memory go. The io_uring engine takes at most 4 GiB - 1 bytes
// per request (ErrTooLarge).
type Request struct {
	Op    Op
	Buf   []byte
	Off   int64
	Token uint64 // the caller's tag, returned in the Completion

	// Done receives exactly one Completion for the request. It must have
	// room for it (buffered by at least the caller's requests in flight):
	// an engine that cannot deliver stalls every user of the queue.
	Done chan<- Completion
}

// A Completion reports the outcome of one Request.
type Completion struct {
	Token uint64
	Op    Op
	N     int   // bytes transferred; short transfers were resumed
	Err   error // nil, io.EOF for a read cut short by the end of the file, or the I/O error
}

// A Queue performs Requests asynchronously, at most Depth at a time, on one
// file. Its methods are safe for concurrent use: one writer and any number
// of readers may share a queue, each with its own Done channel.
//
// A queue is cheap: the io_uring engine runs every queue of the process on
// a few shared rings (see URingError), so a queue per open file costs no
// ring and no goroutine of its own; while more goroutines wait on a ring
// than GOMAXPROCS, one goroutine on a thread of its own submits and reaps
// for them, and a queue whose requests it submits holds a duplicate of
// its file's descriptor until Close. The pwrite engine runs Depth worker
// goroutines. Close never hangs, whatever races it, and every request that
// Submit accepted gets exactly one Completion, with its Token, on its
// Done channel, also when the queue is closed or its ring breaks. A
// caller with many requests at once hands them over with SubmitBatch.
type Queue interface {
	// Submit hands r to the queue, waiting (and reaping) while Depth
	// requests are in flight. A request that breaks the queue's alignment fails at once with
	// an error matching ErrUnaligned and is not queued.
	Submit(r Request) error
	// Await returns the next Completion from done, a request's Done
	// channel, doing the engine's work while it waits: the io_uring engine
	// reaps its ring in the caller's thread (or, while many wait, in the
	// ring's owner thread), so a completion wakes the goroutine that waits
	// for it. Receive completions through Await, not
	// from the channel alone, which nothing may fill.
	Await(done <-chan Completion) Completion
	// Depth returns the most requests the queue runs at once.
	Depth() int
	// Engine returns the engine that performs the requests.
	Engine() EngineKind
	// Close waits for the queue's own requests in flight, delivers their
	// completions to their Done channels, and releases the engine. Later
	// Submits fail with ErrQueueClosed; an Await with none of the queue's
	// requests outstanding then returns a Completion with Op 0 and Err
	// ErrQueueClosed, the one Completion that is no request's.
	Close() error
}

// A BufferRegistrar is a Queue that can register buffers with the kernel
// (io_uring's fixed buffers), so that requests inside them skip the page
// pinning of every I/O. A refusal leaves the queue working as before, with
// plain requests. The io_uring engine refuses, with an error matching
// errors.ErrUnsupported: its rings are shared by every file of the process
// and so is a ring's one table of registered buffers, and a ring of a
// writer's own did not pay for itself where the device sets the pace.
type BufferRegistrar interface {
	RegisterBuffers(bufs [][]byte) error
}

// EngineKind names a Queue engine.
type EngineKind uint8

// The engines. EngineAuto asks NewQueue for the best one available.
const (
	EngineAuto EngineKind = iota
	EnginePwrite
	EngineURing
)

func (k EngineKind) String() string {
	switch k {
	case EngineAuto:
		return "auto"
	case EnginePwrite:
		return "pwrite"
	case EngineURing:
		return "io_uring"
	}
	return fmt.Sprintf("EngineKind(%d)", uint8(k))
}

// DefaultDepth is the queue depth when QueueOptions leave it zero: the
// measured knee on NVMe and virtio disks for 64 KiB sequential writes.
const DefaultDepth = 4

// MaxDepth is the largest QueueOptions.Depth, io_uring's
// IORING_MAX_ENTRIES: the pwrite engine runs a goroutine per unit of
// depth, and a depth of 2^30 asked the runtime for 60 GB.
const MaxDepth = 32768

// QueueOptions configure NewQueue. A nil *QueueOptions means defaults.
type QueueOptions struct {
	Depth     int        // this queue's requests in flight at most; default DefaultDepth, at most MaxDepth
	Engine    EngineKind // default EngineAuto
	Alignment Alignment  // checked on every request; zero means none (a page-cache file); else both fields > 0

	// WriteFlags are RWF_* flags (pwritev2(2)) for every write, added to
	// the File's (see File.WithWriteFlags): the pwrite engine calls
	// pwritev2 with them, io_uring sets them as the SQE's rw_flags.
	// Linux only; 0 means plain writes.
	WriteFlags int

	// Faults, when set, is consulted before every system call the
	// engine makes for a request (after it, for io_uring), in place of
	// the File's own (see File.WithFaults): the seam for fault injection
	// in tests of dio and of programs built on it. See package faults.
	Faults Injector
}

// A Fault is what an Injector makes of one system call.
type Fault struct {
	Err   syscall.Errno // fail with this errno; EINTR and EAGAIN are retried by the engine
	Short int           // else transfer at most this many bytes; the engine resumes the rest
	Delay time.Duration // and complete this late
}

// An Injector decides which system calls fail. It is called from the
// engine's goroutines, so it must be safe for concurrent use.
type Injector interface {
	// Inject is asked before a read or write of n bytes at off, or an
	// fdatasync (OpSync, 0, 0); ok false lets the call run untouched.
	Inject(op Op, off int64, n int) (f Fault, ok bool)
}

// NewQueue returns a Queue over f. With EngineAuto it returns the io_uring
// engine where the kernel offers it and the pwrite engine otherwise;
// URingError says why io_uring was ruled out.
//
// Requests use f's descriptor only inside os.File's reference (see File's
// Close), so closing f while requests are queued makes them fail with an
// error matching fs.ErrClosed rather than reach another file. A nil f or
// a Depth over MaxDepth gives an error matching ErrInvalidQueueOptions.
func NewQueue(f *os.File, o *QueueOptions) (Queue, error) {
	if f == nil {
		return nil, fmt.Errorf("%w: no file", ErrInvalidQueueOptions)
	}
	x := newXfer(f, pageCache, false)
	if o != nil && o.Alignment != (Alignment{}) {
		if !aligned.IsPowerOfTwo(o.Alignment.Memory) || !aligned.IsPowerOfTwo(o.Alignment.Offset) {
			return nil, fmt.Errorf("%w: %v: memory and offset alignment must both be powers of two", ErrInvalidAlignment, o.Alignment)
		}
		x = newXfer(f, o.Alignment, true)
	}
	return newQueue(x, o)
}

// NewQueue returns a Queue over f that checks every request against f's
// alignment. o.Alignment is ignored.
func (f *File) NewQueue(o *QueueOptions) (Queue, error) { return newQueue(f.xfer, o) }

func newQueue(x xfer, o *QueueOptions) (Queue, error) {
	var opts QueueOptions
	if o != nil {
		opts = *o
	}
	if opts.Faults != nil {
		x.faults = opts.Faults // this queue's, over the File's (WithFaults)
	}
	x.writeFlags |= opts.WriteFlags
	if opts.Depth <= 0 {
		opts.Depth = DefaultDepth
	}
	if opts.Depth > MaxDepth {
		return nil, fmt.Errorf("%w: Depth %d, at most %d", ErrInvalidQueueOptions, opts.Depth, MaxDepth)
	}
	switch opts.Engine {
	case EnginePwrite:
		return newPwriteQueue(x, opts.Depth), nil
	case EngineURing:
		return newURingQueue(x, opts.Depth)
	case EngineAuto:
		q, err := newURingQueue(x, opts.Depth)
		if err != nil {
			return newPwriteQueue(x, opts.Depth), nil
		}
		return q, nil
	}
	return nil, fmt.Errorf("direct: unknown engine %v", opts.Engine)
}
