package direct

import (
	"errors"
	"io"
	"sync/atomic"
	"syscall"
	"time"
)

// How the statistics are kept. The counters live in statShards copies
// (shards), each a block of atomic counters for every path and
// operation; every File (and every Meter) writes to one shard, chosen
// round robin when it is opened, and the io_uring engine to its ring's,
// so two cores recording at once rarely meet on a cache line, as they
// would on one set of process-wide counters. Stats adds the shards up.
// The shards are package state, the one place the process-wide
// statistics can be: zero until an operation touches them, in memory
// that is not committed until then.

// statShards is the number of copies of the counters: more than the
// cores that a service's I/O usually runs on at once.
const statShards = 8

// registry holds the process's counters.
var registry [statShards]shard

// nextShard picks shards round robin.
var nextShard atomic.Uint32

// pickShard returns the shard for a new File or Meter.
func pickShard() uint8 { return uint8(nextShard.Add(1) % statShards) }

// numOpKinds is the number of operations counted per path and per
// Meter: OpWrite, OpRead, OpSync, OpTruncate, then OpSyncDir.
const numOpKinds = 5

// opKind indexes the counters of op.
func opKind(op Op) int { return int(op) - int(OpWrite) }

// shard is one copy of the process's counters.
type shard struct {
	ops           [NumPaths][numOpKinds - 1]opRec
	dirSync       opRec
	sectorErrors  atomic.Uint64
	writerRetries atomic.Uint64
	slow          atomic.Uint64
	engine        engineRec
	_             [64]byte // the next shard's counters start on a line of their own
}

// opRec counts one operation on one path of a shard. An operation adds
// to three counters: bytes and the latency's sum, on one cache line,
// and its latency's bucket. Ops is the latency's count and Errors the
// errnos' sum, added up by Stats.
type opRec struct {
	bytes   atomic.Uint64
	latency histRec
	retries atomic.Uint64
	asked   atomic.Uint64
	errnos  [len(Errnos{}.n)]atomic.Uint64
}

// histRec is a Histogram being recorded.
type histRec struct {
	sum     atomic.Int64
	buckets [HistogramBuckets]atomic.Uint64
}

// add counts one latency of ns.
func (h *histRec) add(ns int64) {
	h.sum.Add(ns)
	h.buckets[bucketOf(ns)].Add(1)
}

// addTo adds the histogram to s and returns its count.
func (h *histRec) addTo(s *Histogram) uint64 {
	var n uint64
	for i := range h.buckets {
		c := h.buckets[i].Load()
		s.Counts[i] += c
		n += c
	}
	s.Sum += time.Duration(h.sum.Load())
	return n
}

// record counts an operation that moved n bytes in ns nanoseconds and
// ended with err (nil, or an error; io.EOF is not one), having made
// retries system calls again.
func (r *opRec) record(n int, err error, ns int64, retries int) {
	r.one(err, ns, retries)
	r.sums(uint64(max(n, 0)), ns)
}

// one counts what is an operation's own: its latency's bucket (which
// counts it), its retries and its error.
func (r *opRec) one(err error, ns int64, retries int) {
	r.latency.buckets[bucketOf(ns)].Add(1)
	if retries > 0 {
		r.retries.Add(uint64(retries))
	}
	if err != nil {
		r.errnos[errnoOf(err)].Add(1)
	}
}

// sums adds what sums over operations: bytes moved and latencies, for
// one operation or a batch whose one each counted.
func (r *opRec) sums(bytes uint64, ns int64) {
	if bytes > 0 {
		r.bytes.Add(bytes)
	}
	r.latency.sum.Add(ns)
}

func (r *opRec) addTo(s *OpStats) {
	s.Ops += r.latency.addTo(&s.Latency)
	s.Retries += r.retries.Load()
	s.Bytes += r.bytes.Load()
	s.Asked += r.asked.Load()
	for i := range r.errnos {
		n := r.errnos[i].Load()
		s.Errnos.n[i] += n
		s.Errors += n
	}
}

// errnoOf returns the slot of Errnos for err.
func errnoOf(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return errnoSlot(e)
	}
	return errnoNone
}

func (sh *shard) addTo(s *IOStats) {
	for p := range sh.ops {
		ps := &s.Paths[p]
		sh.ops[p][opKind(OpRead)].addTo(&ps.Read)
		sh.ops[p][opKind(OpWrite)].addTo(&ps.Write)
		sh.ops[p][opKind(OpSync)].addTo(&ps.Sync)
		sh.ops[p][opKind(OpTruncate)].addTo(&ps.Truncate)
	}
	sh.dirSync.addTo(&s.DirSync)
	s.SectorErrors += sh.sectorErrors.Load()
	s.WriterRetries += sh.writerRetries.Load()
	s.Slow += sh.slow.Load()
	sh.engine.addTo(&s.Engine)
}

// rec returns the counters of op on path p, OpSyncDir's whatever p.
func (sh *shard) rec(p Path, op Op) *opRec {
	if op == OpSyncDir {
		return &sh.dirSync
	}
	return &sh.ops[p][opKind(op)]
}

// engineRec is a shard's EngineStats being recorded. The engines call
// its methods: see docs/observing.md for where.
type engineRec struct {
	rings     atomic.Int64
	inFlight  atomic.Int64
	enters    atomic.Uint64
	submitted atomic.Uint64
	wakes     atomic.Uint64
	reaped    atomic.Uint64
	perEnter  [len(Batches{})]atomic.Uint64
	perWake   [len(Batches{})]atomic.Uint64
}

// entered counts an io_uring_enter that submitted n requests (n > 0).
func (e *engineRec) entered(n int) {
	if !recording {
		return
	}
	e.enters.Add(1)
	e.submitted.Add(uint64(n))
	e.perEnter[batchSlot(n)].Add(1)
}

// woke counts a reap that found n completions (n > 0).
func (e *engineRec) woke(n int) {
	if !recording {
		return
	}
	e.wakes.Add(1)
	e.reaped.Add(uint64(n))
	e.perWake[batchSlot(n)].Add(1)
}

func (e *engineRec) addTo(s *EngineStats) {
	s.Rings += e.rings.Load()
	s.InFlight += e.inFlight.Load()
	s.Enters += e.enters.Load()
	s.Submitted += e.submitted.Load()
	s.Wakes += e.wakes.Load()
	s.Reaped += e.reaped.Load()
	for i := range e.perEnter {
		s.PerEnter[i] += e.perEnter[i].Load()
		s.PerWake[i] += e.perWake[i].Load()
	}
}

// epoch is the origin of the statistics' clock.
var epoch = time.Now()

// monotonic reads the monotonic clock, in nanoseconds since epoch: one
// vDSO call (time.Since reads only the monotonic clock, where time.Now
// reads the wall clock too).
func monotonic() int64 { return int64(time.Since(epoch)) }

// A tick is an operation under way: when it started and, when its
// file's Meter watches for slow I/O, the slot that shows it in flight.
// Whoever runs the operation takes a tick with begin before it reaches
// the kernel and gives it to end once it is over; an engine keeps it
// with the request (uringOp.tick).
type tick struct {
	start int64
	slot  int32 // in x.meter's watch; -1: not watched
}

// begin starts an operation of x's: op on n bytes at off.
func (x *xfer) begin(op Op, off int64, n int) tick {
	if !recording {
		return tick{slot: -1}
	}
	return x.beginAt(monotonic(), op, off, n)
}

// beginAt is begin with the clock read by the caller, which can read it
// once for a batch of requests.
func (x *xfer) beginAt(now int64, op Op, off int64, n int) tick {
	t := tick{start: now, slot: -1}
	if m := x.meter; recording && m != nil && m.watch != nil {
		t.slot = m.watch.claim(op, off, n, x.f, now)
	}
	return t
}

// drop forgets the operation t began, which never reached the kernel.
func (x *xfer) drop(t tick) {
	if t.slot >= 0 {
		x.meter.watch.release(t.slot)
	}
}

// queued counts a request a queue accepted (+1) or delivered (-1).
func (x *xfer) queued(d int64) {
	if recording {
		registry[x.shard].engine.inFlight.Add(d)
	}
}

// end records the operation t began, on path p, now: it moved n bytes,
// ended with err and made retries system calls again.
func (x *xfer) end(t tick, p Path, op Op, n int, err error, retries int) {
	if !recording {
		return
	}
	x.endAt(monotonic(), t, p, op, n, err, retries)
}

// endAt is end with the clock read by the caller, which can read it
// once for a batch of completions.
func (x *xfer) endAt(now int64, t tick, p Path, op Op, n int, err error, retries int) {
	if !recording {
		return
	}
	if err == io.EOF {
		err = nil // the end of the file, not a failure
	}
	ns := now - t.start
	registry[x.shard].rec(p, op).record(n, err, ns, retries)
	if m := x.meter; m != nil {
		m.record(op, n, err, ns, retries)
		if t.slot >= 0 {
			m.watch.release(t.slot)
		}
	}
}

// An endBatch records the ends of a batch of operations (an engine's
// reap) as endAt and queued(-1) would one by one, with what sums over
// operations added once per run of one file's operations of one kind on
// one path: each operation then costs the process's counters one atomic
// add (its latency's bucket) instead of three, and its Meter none
// instead of two. Flush before the operations are delivered, so that a
// caller who sees its completion sees it counted.
type endBatch struct {
	x     *xfer
	p     Path
	op    Op
	ops   uint64
	bytes uint64
	ns    int64
}

// end records an operation of x's as endAt does.
func (b *endBatch) end(x *xfer, now int64, t tick, p Path, op Op, n int, err error, retries int) {
	if !recording {
		return
	}
	if err == io.EOF {
		err = nil // the end of the file, not a failure
	}
	if b.x != x || b.p != p || b.op != op {
		b.flush()
		b.x, b.p, b.op = x, p, op
	}
	ns := now - t.start
	registry[x.shard].rec(p, op).one(err, ns, retries)
	if m := x.meter; m != nil {
		m.one(op, err, ns, retries)
		if t.slot >= 0 {
			m.watch.release(t.slot)
		}
	}
	b.ops++
	b.bytes += uint64(max(n, 0))
	b.ns += ns
}

// flush adds the run's sums, and takes its operations out of the
// requests in flight.
func (b *endBatch) flush() {
	if b.ops == 0 {
		return
	}
	x := b.x
	registry[x.shard].rec(b.p, b.op).sums(b.bytes, b.ns)
	if m := x.meter; m != nil {
		m.sums(b.op, b.ops, b.bytes)
	}
	x.queued(-int64(b.ops))
	*b = endBatch{}
}

// syncPath is the path of x's own system calls (and the pwrite
// engine's): pwrite with O_DIRECT, else the page cache.
func (x *xfer) syncPath() Path {
	if x.direct {
		return PathPwrite
	}
	return PathStdFS
}

// uringPath is the path of x's requests through io_uring.
func (x *xfer) uringPath() Path {
	if x.direct {
		return PathURing
	}
	return PathStdFS
}

// sectorsBad counts n sectors a split read found unreadable.
func (x *xfer) sectorsBad(n int) {
	registry[x.shard].sectorErrors.Add(uint64(n))
	if m := x.meter; m != nil {
		m.sectorErrors.Add(uint64(n))
	}
}
