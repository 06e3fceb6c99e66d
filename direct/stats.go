package direct

import (
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"math/bits"
	"syscall"
	"time"
)

// Statistics. Every operation dio hands the kernel is counted, process
// wide, by operation and by path: how many, how many failed and with
// which errno, how many bytes the device moved, and how long each took,
// in a histogram of fixed log-linear buckets (RocksDB's Statistics and
// Pebble's Metrics answer the same questions). The counters are atomic
// and sharded, nothing is allocated, and they are always on: an
// operation costs two reads of the monotonic clock and a few atomic
// additions on cache lines that other cores rarely touch. Stats returns
// a snapshot; IOStats.Sub turns two into the I/O of an interval.
//
// An operation is one ReadAt, WriteAt, WriteAtomicAt, Sync or Truncate
// of a File, or one Request of a Queue: its retries after EINTR or
// EAGAIN and the resumption of a short transfer are inside it
// (OpStats.Retries), and its latency runs from its start (its Submit,
// for a queue) to its completion. A read that failed with EIO and is
// read again sector by sector (ReadAt) is that failed operation and then
// one operation per sector, each counted; the sectors that fail are
// IOStats.SectorErrors too. Requests refused before they reach the
// kernel (ErrUnaligned, a closed queue) are not operations.

// Path is the way an operation reached the device.
type Path uint8

// The paths. A File's own calls (ReadAt, WriteAt, ...) take the
// pwrite path when it is opened with O_DIRECT, as do the pwrite
// engine's requests; a Buffered File's take std-fs, whatever the engine.
const (
	PathURing  Path = iota // O_DIRECT through io_uring: "direct+io_uring"
	PathPwrite             // O_DIRECT through pread, pwrite and fdatasync: "direct+pwrite"
	PathStdFS              // through the page cache (Buffered; fallback's std-fs): "std-fs"
	NumPaths               // the number of paths
)

func (p Path) String() string {
	switch p {
	case PathURing:
		return "direct+io_uring"
	case PathPwrite:
		return "direct+pwrite"
	case PathStdFS:
		return "std-fs"
	}
	return fmt.Sprintf("Path(%d)", uint8(p))
}

// Paths lists every Path, for ranging over.
func Paths() [NumPaths]Path { return [NumPaths]Path{PathURing, PathPwrite, PathStdFS} }

// The operations statistics count besides a Queue's. A Queue takes
// neither.
const (
	OpTruncate Op = OpSync + 1 + iota // ftruncate: File.Truncate
	OpSyncDir                         // fsync of a directory: SyncDir
)

// IOStats is a snapshot of the process's I/O since it started (see
// Stats). Each count is read atomically but not all at once: under load
// the counts of one snapshot may disagree by the operations that were
// completing while it was taken.
type IOStats struct {
	// PathStats's Read, Write, Sync and Truncate are the operations of
	// every path together; Paths has them by path.
	PathStats
	// DirSync counts directory fsyncs (SyncDir), which belong to no
	// file's path.
	DirSync OpStats
	Paths   PathTable

	// SectorErrors counts the sectors a read split after EIO (see
	// ReadSectors) found unreadable: latent sector errors.
	SectorErrors uint64
	// WriterRetries counts the writes and fdatasyncs that writers
	// above this package (fileio, blobio, ephemeral) made again after
	// a failure they survive (ENOSPC, EDQUOT, EIO), reported through a
	// Meter.
	WriterRetries uint64
	// Slow counts the operations reported as slow (SlowPolicy) while
	// in flight.
	Slow uint64

	Engine EngineStats
}

// PathTable holds statistics by Path: PathTable[PathURing] is
// direct+io_uring's. In JSON it is an object keyed by the paths' names.
type PathTable [NumPaths]PathStats

// PathStats is one path's statistics by operation.
type PathStats struct{ Read, Write, Sync, Truncate OpStats }

// OpStats counts one kind of operation.
type OpStats struct {
	Ops     uint64 // operations completed, failed ones included
	Errors  uint64 // operations that failed (a read cut short by the end of the file did not)
	Retries uint64 // system calls made again inside operations: after EINTR or EAGAIN, or to resume a short transfer
	Bytes   uint64 // bytes the device moved: aligned lengths, padded tails included

	// Asked counts the bytes callers of dio's readers and writers
	// asked for (reported through a Meter: fileio, blobio, ephemeral),
	// so that Bytes/Asked is the amplification of alignment and padded
	// tails. Direct callers of File and Queue ask for what they move
	// and are not counted here.
	Asked uint64

	Latency Histogram // each operation's latency
	Errnos  Errnos    // Errors by errno
}

// Stats returns the process's I/O statistics since it started. It reads
// a few tens of thousands of counters: cheap for a scrape every few
// seconds, not for every operation.
func Stats() IOStats {
	var s IOStats
	for i := range registry {
		registry[i].addTo(&s)
	}
	for p := range s.Paths {
		s.PathStats.add(&s.Paths[p])
	}
	return s
}

// Sub returns the I/O between prev, an earlier snapshot, and s: every
// count of s minus prev's, except the engine's gauges (Rings, InFlight),
// which are s's.
func (s IOStats) Sub(prev IOStats) IOStats {
	s.PathStats.sub(&prev.PathStats)
	s.DirSync.sub(&prev.DirSync)
	for p := range s.Paths {
		s.Paths[p].sub(&prev.Paths[p])
	}
	s.SectorErrors -= prev.SectorErrors
	s.WriterRetries -= prev.WriterRetries
	s.Slow -= prev.Slow
	s.Engine = s.Engine.Sub(prev.Engine)
	return s
}

// Op returns the statistics of op (OpRead, OpWrite, OpSync, OpTruncate
// or OpSyncDir), every path together.
func (s *IOStats) Op(op Op) *OpStats {
	if op == OpSyncDir {
		return &s.DirSync
	}
	return s.PathStats.Op(op)
}

// Op returns the statistics of op (OpRead, OpWrite, OpSync or
// OpTruncate) on the path.
func (s *PathStats) Op(op Op) *OpStats {
	return pick(op, &s.Read, &s.Write, &s.Sync, &s.Truncate, nil)
}

// pick returns the one of the counts of an operation that counts op, or
// nil.
func pick[T any](op Op, read, write, sync, truncate, dirSync *T) *T {
	switch op {
	case OpRead:
		return read
	case OpWrite:
		return write
	case OpSync:
		return sync
	case OpTruncate:
		return truncate
	case OpSyncDir:
		return dirSync
	}
	return nil
}

// pathOps are the operations of a PathStats.
var pathOps = [...]Op{OpRead, OpWrite, OpSync, OpTruncate}

func (s *PathStats) add(p *PathStats) {
	for _, op := range pathOps {
		s.Op(op).add(p.Op(op))
	}
}

func (s *PathStats) sub(p *PathStats) {
	for _, op := range pathOps {
		s.Op(op).sub(p.Op(op))
	}
}

// MarshalJSON writes the table as an object keyed by the paths' names:
// {"direct+io_uring": {...}, "direct+pwrite": {...}, "std-fs": {...}}.
func (t PathTable) MarshalJSON() ([]byte, error) {
	m := make(map[string]PathStats, len(t))
	for _, p := range Paths() {
		m[p.String()] = t[p]
	}
	return json.Marshal(m)
}

func (o *OpStats) add(p *OpStats) {
	o.Ops += p.Ops
	o.Errors += p.Errors
	o.Retries += p.Retries
	o.Bytes += p.Bytes
	o.Asked += p.Asked
	o.Latency.add(&p.Latency)
	for i := range o.Errnos.n {
		o.Errnos.n[i] += p.Errnos.n[i]
	}
}

func (o *OpStats) sub(p *OpStats) {
	o.Ops -= p.Ops
	o.Errors -= p.Errors
	o.Retries -= p.Retries
	o.Bytes -= p.Bytes
	o.Asked -= p.Asked
	o.Latency = o.Latency.Sub(p.Latency)
	for i := range o.Errnos.n {
		o.Errnos.n[i] -= p.Errnos.n[i]
	}
}

// Latency histograms. Buckets are log-linear, as HdrHistogram's: the
// first 2*histSub are one nanosecond wide, then every doubling of the
// latency is split into histSub buckets of equal width, up to
// 2^histMaxBits ns (about 69 s); longer operations share the last
// bucket. A bucket is at most 1/histSub of its lower bound wide, so a
// quantile read from it (interpolated inside the bucket) is within
// 12.5% of the true latency.
const (
	histSubBits = 3
	histSub     = 1 << histSubBits
	histMaxBits = 36

	// HistogramBuckets is the number of buckets of a Histogram.
	HistogramBuckets = (histMaxBits-histSubBits+1)<<histSubBits + 1
)

// Histogram counts operations by latency, in fixed log-linear buckets:
// Counts[i] is the number of operations whose latency fell in
// BucketBounds(i). Quantile reads percentiles from it; Sub subtracts an
// earlier snapshot.
type Histogram struct {
	Counts [HistogramBuckets]uint64
	Sum    time.Duration // the latencies added up, for a mean
}

// bucketOf returns the bucket of a latency of ns nanoseconds.
func bucketOf(ns int64) int {
	if ns < 2*histSub {
		return int(max(ns, 0))
	}
	v := uint64(ns)
	shift := bits.Len64(v) - histSubBits - 1
	i := (shift+1)<<histSubBits + int(v>>shift) - histSub
	return min(i, HistogramBuckets-1)
}

// BucketBounds returns the latencies bucket i of a Histogram counts:
// [lo, hi). The last bucket's hi is the longest time.Duration.
func BucketBounds(i int) (lo, hi time.Duration) {
	switch {
	case i < 0 || i >= HistogramBuckets:
		return 0, 0
	case i < 2*histSub:
		return time.Duration(i), time.Duration(i + 1)
	case i == HistogramBuckets-1:
		return bucketLow(i), math.MaxInt64
	}
	return bucketLow(i), bucketLow(i + 1)
}

func bucketLow(i int) time.Duration {
	shift := i>>histSubBits - 1
	return time.Duration(i&(histSub-1)+histSub) << shift
}

// Count returns the number of operations in the histogram.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Mean returns the mean latency, 0 for an empty histogram.
func (h Histogram) Mean() time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	return h.Sum / time.Duration(n)
}

// Quantile returns the latency below which a fraction q (0 to 1) of the
// operations fell: Quantile(0.99) is the p99. It is interpolated
// linearly inside the bucket where it lies, so it is within a bucket's
// width (12.5%) of the true value. An empty histogram returns 0; q is
// clamped to [0, 1]. The last bucket (69 s and longer) answers with its
// lower bound.
func (h Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := q * float64(n) // the rank-th operation, 1-based; 0 means the least
	var seen uint64
	for i, c := range h.Counts {
		if c == 0 || float64(seen+c) < rank {
			seen += c
			continue
		}
		lo, hi := BucketBounds(i)
		if i == HistogramBuckets-1 {
			return lo
		}
		frac := (rank - float64(seen)) / float64(c)
		return lo + time.Duration(frac*float64(hi-lo))
	}
	return 0 // not reached: rank <= n
}

// Sub returns h minus prev, an earlier snapshot of the same histogram.
func (h Histogram) Sub(prev Histogram) Histogram {
	for i := range h.Counts {
		h.Counts[i] -= prev.Counts[i]
	}
	h.Sum -= prev.Sum
	return h
}

func (h *Histogram) add(p *Histogram) {
	for i := range h.Counts {
		h.Counts[i] += p.Counts[i]
	}
	h.Sum += p.Sum
}

// MarshalJSON writes the histogram's summary, not its buckets:
// {"count": 12, "mean_us": 8.1, "p50_us": 7.9, "p99_us": 21.2,
// "p999_us": 40.3, "max_us": 44}, max being the upper bound of the
// highest bucket in use. Exporters that want the buckets read Counts.
func (h Histogram) MarshalJSON() ([]byte, error) {
	us := func(d time.Duration) float64 { return math.Round(float64(d)/1e1) / 1e2 }
	var top time.Duration
	for i := len(h.Counts) - 1; i >= 0; i-- {
		if h.Counts[i] > 0 {
			lo, hi := BucketBounds(i)
			top = hi
			if i == HistogramBuckets-1 {
				top = lo
			}
			break
		}
	}
	return json.Marshal(struct {
		Count uint64  `json:"count"`
		Mean  float64 `json:"mean_us"`
		P50   float64 `json:"p50_us"`
		P99   float64 `json:"p99_us"`
		P999  float64 `json:"p999_us"`
		Max   float64 `json:"max_us"`
	}{h.Count(), us(h.Mean()), us(h.Quantile(0.5)), us(h.Quantile(0.99)), us(h.Quantile(0.999)), us(top)})
}

// Errnos counts failed operations by errno: the errnos a storage
// service meets or must tell apart one by one, the others together
// (Other), and the errors that carry none (NoErrno: a closed file, a
// short write, a broken ring).
type Errnos struct {
	n [len(countedErrnos) + 2]uint64
}

// countedErrnos are the errnos Errnos counts one by one.
var countedErrnos = [...]struct {
	errno syscall.Errno
	name  string
}{
	{syscall.EIO, "EIO"},
	{syscall.ENOSPC, "ENOSPC"},
	{syscall.EDQUOT, "EDQUOT"},
	{syscall.EINVAL, "EINVAL"},
	{syscall.EBADF, "EBADF"},
	{syscall.EROFS, "EROFS"},
	{syscall.EFBIG, "EFBIG"},
	{syscall.ENOMEM, "ENOMEM"},
	{syscall.EOPNOTSUPP, "EOPNOTSUPP"},
	{syscall.EAGAIN, "EAGAIN"},
	{syscall.EINTR, "EINTR"},
	{syscall.ECANCELED, "ECANCELED"},
	{syscall.EPERM, "EPERM"},
	{syscall.ENXIO, "ENXIO"},
}

// The two last slots of Errnos.
const (
	errnoOther = len(countedErrnos)
	errnoNone  = len(countedErrnos) + 1
)

// errnoSlot returns the slot of Errnos that counts errno.
func errnoSlot(errno syscall.Errno) int {
	for i, e := range countedErrnos {
		if e.errno == errno {
			return i
		}
	}
	return errnoOther
}

// Count returns the failures with errno, which must be one Errnos
// counts on its own (All names them); any other errno returns 0 and is
// in Other.
func (e Errnos) Count(errno syscall.Errno) uint64 {
	i := errnoSlot(errno)
	if i == errnoOther {
		return 0
	}
	return e.n[i]
}

// Other returns the failures with an errno not counted on its own.
func (e Errnos) Other() uint64 { return e.n[errnoOther] }

// NoErrno returns the failures whose error carries no errno.
func (e Errnos) NoErrno() uint64 { return e.n[errnoNone] }

// All yields every count that is not zero with its name: an errno's
// ("EIO", "ENOSPC", ...), "other" and "none".
func (e Errnos) All() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		for i, n := range e.n {
			if n == 0 {
				continue
			}
			name := "other"
			switch {
			case i < len(countedErrnos):
				name = countedErrnos[i].name
			case i == errnoNone:
				name = "none"
			}
			if !yield(name, n) {
				return
			}
		}
	}
}

// MarshalJSON writes the counts that are not zero, by name: {"EIO": 2}.
func (e Errnos) MarshalJSON() ([]byte, error) {
	m := map[string]uint64{}
	for name, n := range e.All() {
		m[name] = n
	}
	return json.Marshal(m)
}

// EngineStats is what the queue engines report of themselves.
type EngineStats struct {
	Rings    int64 // io_uring rings set up now (a gauge)
	InFlight int64 // requests queues accepted and have not completed yet, every engine (a gauge)

	Enters    uint64  // io_uring_enter calls that submitted requests
	Submitted uint64  // requests they submitted: Submitted/Enters per enter
	Wakes     uint64  // reaps that found completions
	Reaped    uint64  // completions they reaped: Reaped/Wakes per wake
	PerEnter  Batches // Enters by the requests each submitted
	PerWake   Batches // Wakes by the completions each reaped
}

// Batches counts batches by size in powers of two: Batches[0] counts
// batches of 1, Batches[i] those of 2^(i-1)+1 to 2^i, the last all
// larger ones.
type Batches [9]uint64

// batchSlot returns the slot of Batches for a batch of n (n >= 1).
func batchSlot(n int) int {
	if n <= 1 {
		return 0
	}
	return min(bits.Len(uint(n-1)), len(Batches{})-1)
}

// SubmittedPerEnter returns Submitted/Enters, 0 when there were none.
func (e EngineStats) SubmittedPerEnter() float64 { return ratio(e.Submitted, e.Enters) }

// ReapedPerWake returns Reaped/Wakes, 0 when there were none.
func (e EngineStats) ReapedPerWake() float64 { return ratio(e.Reaped, e.Wakes) }

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Sub returns e minus prev, but for the gauges (Rings, InFlight), which
// are e's.
func (e EngineStats) Sub(prev EngineStats) EngineStats {
	e.Enters -= prev.Enters
	e.Submitted -= prev.Submitted
	e.Wakes -= prev.Wakes
	e.Reaped -= prev.Reaped
	for i := range e.PerEnter {
		e.PerEnter[i] -= prev.PerEnter[i]
		e.PerWake[i] -= prev.PerWake[i]
	}
	return e
}
