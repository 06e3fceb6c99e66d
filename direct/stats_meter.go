package direct

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"sync/atomic"
	"time"
)

// A Meter counts the I/O of one object, a writer's or a reader's file,
// beside the process-wide statistics: File.WithMeter attaches it, and
// every operation of the File and of its queues is then counted in it
// too. Its owner reports what its callers asked for (Asked) and what it
// did again (WriterRetried), so that Stats shows the amplification of
// alignment and padded tails: fileio's Reader and Writer are made of
// one. With a SlowPolicy it reports operations still in flight past a
// threshold. A Meter is safe for concurrent use.
type Meter struct {
	shard uint8
	path  atomic.Int32 // the Path of the File last attached; -1 before

	ops           [numOpKinds]meterRec
	sectorErrors  atomic.Uint64
	writerRetries atomic.Uint64
	slow          atomic.Uint64
	syncLatency   *histRec // with MeterOptions.SyncLatency
	watch         *watch   // with MeterOptions.Slow
}

// meterRec counts one operation of a Meter's.
type meterRec struct {
	ops, errors, retries, bytes atomic.Uint64
	calls, asked                atomic.Uint64
}

// MeterOptions configure NewMeter. A nil *MeterOptions means defaults.
type MeterOptions struct {
	// SyncLatency keeps a histogram of the meter's fdatasyncs
	// (MeterStats.SyncLatency): 2 KiB more per Meter.
	SyncLatency bool
	// Slow, when set, reports the meter's operations that are still in
	// flight past Slow.Threshold.
	Slow *SlowPolicy
}

// SlowPolicy asks for the operations still in flight past Threshold to
// be reported: Report is called once per operation, as soon as a check
// finds it past the threshold (within a quarter of Threshold, or 1 ms,
// after it crossed it), while the operation goes on. Pebble's
// vfs.WithDiskHealthChecks does the same for its files.
//
// Report runs on a goroutine of the Meter's, never on the one doing the
// I/O, which nothing delays: a Report that blocks only delays later
// reports. The check runs every Threshold/4 (at least every 1 ms) while
// an operation is in flight and stops while none is, so an idle Meter
// costs nothing. At most 128 operations per Meter are watched at once;
// more go unwatched.
type SlowPolicy struct {
	Threshold time.Duration  // > 0
	Report    func(s SlowIO) // != nil
}

// SlowIO describes an operation still in flight past a SlowPolicy's
// threshold.
type SlowIO struct {
	Name    string        // the file's name; the directory's, for OpSyncDir
	Op      Op            // OpRead, OpWrite, OpSync, OpTruncate or OpSyncDir
	Off     int64         // where a read or write started
	Len     int           // the bytes a read or write moves
	Elapsed time.Duration // how long it has been in flight so far
}

func (s SlowIO) String() string {
	if s.Op == OpRead || s.Op == OpWrite {
		return fmt.Sprintf("%s of %d bytes at %d on %s in flight for %v", s.Op, s.Len, s.Off, s.Name, s.Elapsed)
	}
	return fmt.Sprintf("%s on %s in flight for %v", s.Op, s.Name, s.Elapsed)
}

// ErrInvalidSlowPolicy reports a SlowPolicy without a positive
// Threshold or without Report.
var ErrInvalidSlowPolicy = errors.New("direct: invalid slow-I/O policy")

// Check returns an error matching ErrInvalidSlowPolicy unless p has a
// positive Threshold and a Report.
func (p *SlowPolicy) Check() error {
	switch {
	case p.Threshold <= 0:
		return fmt.Errorf("%w: threshold %v, must be positive", ErrInvalidSlowPolicy, p.Threshold)
	case p.Report == nil:
		return fmt.Errorf("%w: no Report function", ErrInvalidSlowPolicy)
	}
	return nil
}

// NewMeter returns a Meter. With o.Slow set it reports slow operations
// until Close; a bad o.Slow is refused with ErrInvalidSlowPolicy.
func NewMeter(o *MeterOptions) (*Meter, error) {
	m := &Meter{shard: pickShard()}
	m.path.Store(-1)
	if o == nil {
		return m, nil
	}
	if o.SyncLatency {
		m.syncLatency = new(histRec)
	}
	if o.Slow != nil {
		if err := o.Slow.Check(); err != nil {
			return nil, err
		}
		m.watch = newWatch(*o.Slow, m)
	}
	return m, nil
}

// Close stops reporting slow operations: no Report starts after Close
// returns (one already running finishes). The counts stay readable.
// Close, Asked, WriterRetried and Stats do nothing on a nil Meter.
func (m *Meter) Close() {
	if m != nil && m.watch != nil {
		m.watch.closed.Store(true)
	}
}

// WithMeter returns a File over the same descriptor whose operations,
// through its methods and every queue made from it, are counted in m
// as well as process wide, and watched when m has a SlowPolicy.
// Closing either File closes both.
func (f *File) WithMeter(m *Meter) *File {
	g := *f
	g.meter = m
	if m != nil {
		p := PathPwrite
		if !f.direct {
			p = PathStdFS
		}
		m.path.Store(int32(p))
	}
	return &g
}

// Asked counts a call of the meter's owner that asked for n bytes to be
// read or written (op OpRead or OpWrite), in the meter and in the
// process's OpStats.Asked of the path of the File last attached.
func (m *Meter) Asked(op Op, n int) { m.AskedCalls(op, 1, n) }

// AskedCalls counts calls calls that asked for n bytes in all, as that
// many Asked would, for an owner that counts a batch at once (blobio's
// ReadBlobs, a blob per offset): three atomic adds for the batch
// instead of three per call.
func (m *Meter) AskedCalls(op Op, calls, n int) {
	if !recording || m == nil || calls <= 0 {
		return
	}
	r := &m.ops[opKind(op)]
	r.calls.Add(uint64(calls))
	r.asked.Add(uint64(n))
	if p := m.path.Load(); p >= 0 {
		registry[m.shard].rec(Path(p), op).asked.Add(uint64(n))
	}
}

// AskedMore counts n more bytes asked for by the call Asked counted
// last (a record's trailer written apart, as blobio's seal of a large
// blob), not another call.
func (m *Meter) AskedMore(op Op, n int) {
	if !recording || m == nil {
		return
	}
	m.ops[opKind(op)].asked.Add(uint64(n))
	if p := m.path.Load(); p >= 0 {
		registry[m.shard].rec(Path(p), op).asked.Add(uint64(n))
	}
}

// UsePath sets the path Asked counts under, where the meter's owner
// knows it better than the File does: a File's own calls take the
// pwrite path, while its queues may run on io_uring.
func (m *Meter) UsePath(p Path) { m.path.Store(int32(p)) }

// WriterRetried counts a write or fdatasync the meter's owner made
// again after a failure it survives (ENOSPC, EDQUOT, EIO).
func (m *Meter) WriterRetried() {
	if m == nil {
		return
	}
	m.writerRetries.Add(1)
	registry[m.shard].writerRetries.Add(1)
}

// record counts an operation of one of the meter's files.
func (m *Meter) record(op Op, n int, err error, ns int64, retries int) {
	m.one(op, err, ns, retries)
	m.sums(op, 1, uint64(max(n, 0)))
}

// sums adds ops operations that moved bytes in all.
func (m *Meter) sums(op Op, ops, bytes uint64) {
	r := &m.ops[opKind(op)]
	r.ops.Add(ops)
	if bytes > 0 {
		r.bytes.Add(bytes)
	}
}

// one counts what is an operation's own: its retries, its error, its
// latency when the meter keeps fdatasyncs'.
func (m *Meter) one(op Op, err error, ns int64, retries int) {
	r := &m.ops[opKind(op)]
	if retries > 0 {
		r.retries.Add(uint64(retries))
	}
	if err != nil {
		r.errors.Add(1)
	}
	if op == OpSync && m.syncLatency != nil {
		m.syncLatency.add(ns)
	}
}

// MeterStats is a snapshot of a Meter's counts.
type MeterStats struct {
	Read, Write, Sync, Truncate, DirSync Counts
	SyncLatency                          Histogram // the fdatasyncs', with MeterOptions.SyncLatency
	SectorErrors                         uint64    // as IOStats's, for the meter's files
	WriterRetries                        uint64    // reported by WriterRetried
	Slow                                 uint64    // operations reported as slow
}

// Counts counts one kind of operation of a Meter's.
type Counts struct {
	Ops, Errors, Retries, Bytes uint64 // as OpStats's, for the meter's files

	// Calls and Asked are the calls the meter's owner reported with
	// Asked and the bytes they asked for.
	Calls, Asked uint64
}

// Stats returns the meter's counts; a nil Meter's are zero.
func (m *Meter) Stats() MeterStats {
	var s MeterStats
	if m == nil {
		return s
	}
	for op, c := range s.all() {
		r := &m.ops[opKind(op)]
		*c = Counts{Ops: r.ops.Load(), Errors: r.errors.Load(), Retries: r.retries.Load(), Bytes: r.bytes.Load(), Calls: r.calls.Load(), Asked: r.asked.Load()}
	}
	if m.syncLatency != nil {
		m.syncLatency.addTo(&s.SyncLatency)
	}
	s.SectorErrors = m.sectorErrors.Load()
	s.WriterRetries = m.writerRetries.Load()
	s.Slow = m.slow.Load()
	return s
}

// Op returns the counts of op: OpRead, OpWrite, OpSync, OpTruncate or
// OpSyncDir.
func (s *MeterStats) Op(op Op) *Counts {
	return pick(op, &s.Read, &s.Write, &s.Sync, &s.Truncate, &s.DirSync)
}

// all yields the operations a Meter counts and their Counts in s.
func (s *MeterStats) all() iter.Seq2[Op, *Counts] {
	return func(yield func(Op, *Counts) bool) {
		for _, op := range [...]Op{OpRead, OpWrite, OpSync, OpTruncate, OpSyncDir} {
			if !yield(op, s.Op(op)) {
				return
			}
		}
	}
}

// Sub returns s minus prev, an earlier snapshot of the same Meter.
func (s MeterStats) Sub(prev MeterStats) MeterStats {
	for op, c := range s.all() {
		p := prev.Op(op)
		c.Ops -= p.Ops
		c.Errors -= p.Errors
		c.Retries -= p.Retries
		c.Bytes -= p.Bytes
		c.Calls -= p.Calls
		c.Asked -= p.Asked
	}
	s.SyncLatency = s.SyncLatency.Sub(prev.SyncLatency)
	s.SectorErrors -= prev.SectorErrors
	s.WriterRetries -= prev.WriterRetries
	s.Slow -= prev.Slow
	return s
}

// The slow-I/O watch. Each operation of a watched Meter takes a slot of
// a fixed array for as long as it is in flight, without a lock: a
// compare-and-swap claims a free slot, and the slot's sequence number,
// a seqlock, says whether it is free (4k), being filled (4k+1) or holds
// an operation in flight (4k+2), the operation's identity besides: one
// goroutine per Meter, started by the first operation and stopped when
// a check finds none in flight, reads the slots every tick and reports
// an operation past the threshold once, by its sequence number.

// watchSlots is the number of operations a Meter watches at once: more
// than a reader's queue and its goroutines keep in flight.
const watchSlots = 128

type watch struct {
	policy  SlowPolicy
	tick    time.Duration
	meter   *Meter
	running atomic.Bool // a loop goroutine is on
	closed  atomic.Bool
	slots   [watchSlots]watchSlot

	// reported is the loop's own: the sequence number of the operation
	// each slot last reported. A loop hands it to the next through
	// running.
	reported [watchSlots]uint64
}

type watchSlot struct {
	seq   atomic.Uint64
	start atomic.Int64
	off   atomic.Int64
	n     atomic.Int64
	op    atomic.Uint32
	file  atomic.Pointer[os.File]
	_     [16]byte // a cache line a slot: operations claiming slots side by side do not meet
}

func newWatch(p SlowPolicy, m *Meter) *watch {
	return &watch{policy: p, tick: max(p.Threshold/4, time.Millisecond), meter: m}
}

// claim shows an operation in flight in a free slot and returns the
// slot, or -1 when it found none free after a few tries: the operation
// then goes unwatched, never waits. The first slot tried comes from the
// clock's low bits, which differ between operations starting side by
// side, so that they share no counter to pick slots with.
func (w *watch) claim(op Op, off int64, n int, f *os.File, start int64) int32 {
	const tries = 8
	first := uint64(start) >> 5 // 32 ns: finer than two clock reads apart
	for k := range uint64(tries) {
		i := (first + k*(watchSlots/tries+1)) % watchSlots
		s := &w.slots[i]
		q := s.seq.Load()
		if q%4 != 0 || !s.seq.CompareAndSwap(q, q+1) {
			continue
		}
		s.start.Store(start)
		s.off.Store(off)
		s.n.Store(int64(n))
		s.op.Store(uint32(op))
		s.file.Store(f)
		s.seq.Store(q + 2)
		// After the slot is shown: a loop that stops sees the slot
		// when it looks again, or this sees it stopped (see loop).
		if !w.running.Load() && w.running.CompareAndSwap(false, true) {
			go w.loop()
		}
		return int32(i)
	}
	return -1
}

// release frees slot i, whose operation is over. The file stays in the
// slot until the next claim: clearing it here could clear the next
// operation's.
func (w *watch) release(i int32) { w.slots[i].seq.Add(2) }

// loop checks the slots every tick while operations are in flight.
func (w *watch) loop() {
	t := time.NewTicker(w.tick)
	defer t.Stop()
	for range t.C {
		if w.closed.Load() {
			w.running.Store(false)
			return
		}
		if w.check() {
			continue
		}
		// Nothing in flight: stop, unless an operation came in between
		// and saw this loop still running, in which case go on.
		w.running.Store(false)
		if !w.inFlight() || !w.running.CompareAndSwap(false, true) {
			return
		}
	}
}

// check reports the operations in flight past the threshold that it
// has not reported yet, and whether any operation is in flight.
func (w *watch) check() bool {
	now := monotonic()
	busy := false
	for i := range w.slots {
		s := &w.slots[i]
		q := s.seq.Load()
		if q%4 != 2 {
			continue
		}
		busy = true
		if w.reported[i] == q {
			continue
		}
		start, off, n, op, f := s.start.Load(), s.off.Load(), s.n.Load(), Op(s.op.Load()), s.file.Load()
		elapsed := time.Duration(now - start)
		if s.seq.Load() != q || elapsed < w.policy.Threshold {
			continue // over since, or not slow yet
		}
		w.reported[i] = q
		name := ""
		if f != nil {
			name = f.Name()
		}
		w.meter.slow.Add(1)
		registry[w.meter.shard].slow.Add(1)
		w.policy.Report(SlowIO{Name: name, Op: op, Off: off, Len: int(n), Elapsed: elapsed})
	}
	return busy
}

// inFlight reports whether a slot holds an operation in flight.
func (w *watch) inFlight() bool {
	for i := range w.slots {
		if w.slots[i].seq.Load()%4 == 2 {
			return true
		}
	}
	return false
}
