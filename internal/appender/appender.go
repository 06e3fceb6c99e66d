// Package appender is the writer core that fileio's Writer, blobio's
// Writer and ephemeral's File share: it creates and reopens files
// (Create, OpenAppend: the policy, the faults, the directory fsync, the
// truncate-on-close file; create.go), and appends a byte stream to a File
// (file.go; a fallback.File) in full aligned buffers, writing earlier
// buffers while the caller fills the next.
//
// Buffer ownership follows Neon's owned_buffers_io: the Appender owns up to
// Buffers buffers, used in ring order; a full one is handed to the queue and
// comes back when its write completes, and waiting for that hand-back is
// the only back-pressure.
//
// Full buffers that are neighbours go to the device as one merged write
// of up to MaxWrite bytes (the ring is cut every MaxWrite bytes, and a
// merged write neither wraps nor crosses a cut): an Appender that owns
// its buffers lays them out in one slab, so that neighbours in the ring
// are neighbours in memory (block-layer plugging, done before the kernel
// sees the writes). The buffer size is then the granularity of memory and
// of Cached, and MaxWrite the size of the I/O. On the virtio disk measured here the
// per-request cost dominates: 128 MiB of direct writes at QD4 took 164 ms
// in 64 KiB requests and 65 ms in 256 KiB ones.
//
// Growing ahead, and what a crash leaves. With O_DIRECT the file is grown
// ahead of the writes with fallocate (mode 0, steps of 1 to 64 MiB), so
// that no write extends it: ext4 and xfs serialise extending direct
// writes. The size then runs past the data until Close cuts it back, so
// a crash (SIGKILL, power cut) leaves a tail of zeros, and so would a
// failed Close, which therefore cuts the file back to Synced. Sync keeps
// the reservation: it only writes the padded tail and fdatasyncs, as the
// size already covers the data and was made durable with the data (the
// fallocate that grew the file is metadata fdatasync commits: ext4 and
// xfs log it in the transaction the data's extents need). Cutting back
// at every Sync cost an ftruncate and, at the next write, an fallocate:
// 200 Syncs took 207 fallocate and 201 ftruncate calls, now 2 and 1. Readers tell that tail from data because the writer never
// puts a 0x00 byte where a header is due (blobio's empty blob has a 4-byte
// header): a 0x00 there ends the written data. Growing with
// FALLOC_FL_KEEP_SIZE instead would keep the size at the data, but every
// write would extend the file again. Measured with dio-check bench
// (seq-no-delta, 64 MiB of 100-byte values, 64 KiB buffers, medians of 9
// runs interleaved, MiB/s, mode 0 / KEEP_SIZE):
//
//	                   direct+io_uring    direct+pwrite
//	virtio ext4        1136 / 1041 (-8%)  908 / 663 (-27%)
//	ext4, loop, 512 B   768 /  697 (-9%)  690 / 639  (-7%)
//	xfs, loop, 4 KiB    656 /  725 (+11%) 564 / 667 (+18%)
//
// The cost on ext4 is over the 5% the ingest may give up, so the file
// grows ahead and the reader owns the zero tail. On a copy-on-write
// filesystem (btrfs) nothing is grown ahead: see copyOnWrite.
//
// The unaligned tail is handled by padding, then truncating, in steps
// named in tail.go: padTail pads the partial last buffer of a Flush
// or Sync with zeros to the file's offset alignment (not to the buffer
// size); refit keeps that tail in memory, moved to the front of the
// buffer, so the next flush rewrites its block (RocksDB's
// WritableFileWriter::WriteDirect "refit"); trimTo cuts the file to the
// logical size at Close, and cutBack to Synced after a failed one.
// glommio's flush_padded pads the same way. Both keep every write aligned, so the
// file never holds a gap and no write is read-modify-write.
//
// An Appender is not safe for concurrent use: one goroutine at a time
// calls its methods. Options.Lock lets readers look into its buffers
// meanwhile (Cached, Size): ephemeral.File's concurrent readers.
package appender

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
)

// Options configure New.
type Options struct {
	BufferSize int           // bytes per buffer, rounded up to the file's alignment; 0: 64 KiB
	Buffers    int           // buffers owned at most; 0: two MaxWrite writes with O_DIRECT and no Pool, at least DefaultBuffers; else DefaultBuffers
	MaxWrite   int           // bytes per merged write at most; 0: DefaultMaxWrite; at most half the buffers
	Pool       *aligned.Pool // where buffers come from, overriding BufferSize; nil: a slab of its own
	NoSync     bool          // Close does not fdatasync (Sync still does)

	// Context bounds New's wait for the first buffer of a spent Pool, the
	// only wait on the Pool: later buffers are taken only when one is
	// free (a writer then waits for its own writes, never for the
	// Pool). A done Context fails New, Pool or not. nil:
	// context.Background().
	Context context.Context

	// Retry, when set, makes the Appender retry a write or fdatasync
	// that failed with an error it can retry (ENOSPC, EDQUOT, EIO) until
	// the policy's Context ends, instead of returning it (retry.go).
	Retry *RetryPolicy

	// Lock, when set, is held around every change to the buffers' state
	// and the size (never across a device wait), so that a caller holding
	// it may call Cached and Size while another goroutine appends. See
	// concurrent.go.
	Lock sync.Locker

	// Meter, for New, is the Meter the caller counts f's I/O in
	// (fallback.WithMeter): the Appender reports its callers' writes and
	// its retries to it (Stats) and closes it with Close or Discard.
	// Create and OpenAppend make their own.
	Meter *direct.Meter

	// For Create and OpenAppend, which open the file themselves:
	IO        fallback.Policy        // the I/O path (see package fallback); default Auto
	Faults    direct.Injector        // tests: failures planted under the file (a faults.Plan)
	NoDirSync bool                   // Create leaves the directory fsync to the caller
	DirSync   func(dir string) error // how Create fsyncs the directory; nil: direct.SyncDir (a test counts)
	Slow      *direct.SlowPolicy     // report the file's operations in flight past a threshold (see direct.Meter)
}

// DefaultBuffers is the number of buffers per writer when the caller does
// not say and nothing merges (page cache, shared pool), and the least
// otherwise: one filling and three in flight. Neon double-buffers (two);
// on the disks measured here (virtio, NVMe) 64 KiB direct writes run at
// about 600 MB/s one at a time and 1.4 GB/s four at a time, and dio-check's
// seq-no-delta ingest rose from ~390 to ~620 MiB/s going from 2 to 5
// buffers.
const DefaultBuffers = 4

// DefaultMaxWrite is the largest merged write when the caller does not
// say; the default ring holds two of them (1 MiB of 64 KiB buffers), so
// one fills while the other is written. Measured on the virtio disk here,
// where every request costs a VM exit, an ingest of 100-byte blobs wrote
// 32 MiB in ~50 ms with 256 KiB writes and ~28 ms with 512 KiB, 1 MiB or
// 2 MiB ones (fio: 64 KiB QD4 ~540 MiB/s, 1 MiB QD4 ~1350, 4 MiB QD8
// ~2000); past 512 KiB the writer's own filling is the limit.
const DefaultMaxWrite = 512 << 10

// Growth bounds for growing the file ahead of the writes, so that no write
// extends it: ext4 and xfs serialise extending direct writes, which makes
// queue depth useless (measured with fio on ext4: QD4 1420 MB/s into
// preallocated space, 590 MB/s extending). Seastar's append-challenged file
// grows ahead the same way.
const (
	minGrowth = 1 << 20
	maxGrowth = 64 << 20
)

// slotState is where a buffer is in its cycle.
type slotState uint8

const (
	idle    slotState = iota // free to fill; may still hold written bytes for Cached
	filling                  // the current buffer
	pending                  // full, waiting to go out in a merged write
	busy                     // in flight
	lost                     // its write failed (or a Sync did): its bytes live only in memory, to be written again
)

// slot is one owned buffer and the stretch of the file it holds.
type slot struct {
	buf    []byte
	pooled *aligned.Buffer // from a shared pool, to give back; nil in the slab
	off    int64           // file offset of buf's first byte, aligned
	n      int             // bytes of the stream in buf
	state  slotState
	span   int // for the first slot of a write: how many slots it covers
}

// Appender appends to a file through aligned buffers.
type Appender struct {
	f          File
	file       fallback.File // the file Create or OpenAppend opened, under f; nil after New
	q          direct.Queue
	pool       *aligned.Pool   // shared pool, or nil
	slab       *aligned.Buffer // the buffers' memory when not from a pool
	bufSize    int
	align      int // offset alignment; 1 on the page cache
	grow       bool
	noSync     bool
	fixed      bool // buffers registered with the engine
	mergeSlots int  // slots per merged write at most: MaxWrite in buffers

	slots []slot // in ring order; a shared pool's grow to cap(slots)
	cur   int    // the slot being filled
	first int    // the first pending slot; == cur when none is (until a sticky error)
	done  chan direct.Completion

	size     int64 // logical size: every byte appended
	synced   int64 // logical size made durable by the last successful Sync or Close
	fileSize int64 // the file's size: grown ahead, or padded past size
	inflight int   // writes submitted and not yet reaped
	err      error // sticky: the first error that cannot be retried
	fault    error // the last error that can be retried (retry.go): bytes wait to be written again
	longer   bool  // a failed fallocate may have left the file longer than fileSize
	retry    *RetryPolicy
	meter    *direct.Meter // the file's counts and the caller's asks, when Create or OpenAppend opened it
	resync   bool          // an fdatasync failed: the next one is a retry

	mu sync.Locker // Options.Lock, or a no-op
}

// New returns an Appender writing to f from offset 0. f must be empty.
// Options that Validate refuses, or a Pool whose buffers do not fit f,
// give an error matching ErrInvalid.
func New(f File, o Options) (*Appender, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ctx := o.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	a := f.Alignment()
	switch {
	case o.Pool != nil:
		o.BufferSize = o.Pool.BufferSize()
	case o.BufferSize <= 0:
		o.BufferSize = aligned.DefaultBufferSize
	default:
		o.BufferSize = aligned.Up(o.BufferSize, max(a.Block(), direct.MinAlignment))
	}
	if o.BufferSize%a.Block() != 0 {
		return nil, invalid("buffer size %d is not a multiple of the file's alignment %v", o.BufferSize, a)
	}
	if o.Pool != nil && o.Pool.Align()%a.Memory != 0 {
		return nil, invalid("a pool of %d-byte buffers aligned to %d does not fit a file of alignment %v",
			o.Pool.BufferSize(), o.Pool.Align(), a)
	}
	if o.MaxWrite <= 0 {
		o.MaxWrite = DefaultMaxWrite
	}

	mergeSlots := max(1, o.MaxWrite/o.BufferSize)
	switch {
	case !f.Mode().Direct:
		// Through the page cache a write is a memcpy: merging buys
		// nothing and lets the buffers fall out of the CPU cache
		// before the kernel copies them.
		mergeSlots = 1
	case o.Pool != nil:
		mergeSlots = 1 // a pool's buffers are not neighbours in memory
	}
	if o.Buffers <= 0 {
		o.Buffers = max(DefaultBuffers, 2*mergeSlots)
	}
	mergeSlots = max(1, min(mergeSlots, o.Buffers/2))
	ap := &Appender{f: f, pool: o.Pool, bufSize: o.BufferSize, align: a.Offset, grow: f.Mode().Direct, noSync: o.NoSync, mergeSlots: mergeSlots, mu: lockerOr(o.Lock), retry: o.Retry, meter: o.Meter}
	// Writes in flight: one per merged write the ring holds, more only
	// when flushes cut runs short (Submit then waits for a slot). Readers
	// of the same file use queues of their own.
	depth := (o.Buffers + mergeSlots - 1) / mergeSlots
	q, err := f.NewQueue(&direct.QueueOptions{Depth: depth})
	if err != nil {
		return nil, err
	}
	ap.q = q
	ap.slots = make([]slot, 0, o.Buffers)
	ap.done = make(chan direct.Completion, o.Buffers)
	if ap.pool != nil {
		// A shared pool lends buffers as they are needed: start with one.
		b, err := ap.pool.Get(ctx)
		if err != nil {
			ap.release()
			return nil, err
		}
		ap.slots = append(ap.slots, slot{buf: b.Bytes(), pooled: b})
	} else {
		// Our own buffers: one slab, so that neighbours merge, registered
		// with the engine where it can (io_uring fixed buffers). Its pages
		// are committed as the ring first fills them (NewLazy): every byte
		// a write takes was copied in or padded by the CPU first, so no
		// write faults a page in, and an idle writer holds no memory.
		ap.slab, err = aligned.NewLazy(o.Buffers*o.BufferSize, max(a.Memory, direct.MinAlignment))
		if err != nil {
			// The only cause is memory: Buffers × BufferSize more than
			// the system maps (ENOMEM), which other Options would fit.
			ap.release()
			return nil, &optionsError{reason: fmt.Sprintf("%d buffers of %d bytes", o.Buffers, o.BufferSize), err: err}
		}
		mem := ap.slab.Bytes()
		for i := range o.Buffers {
			ap.slots = append(ap.slots, slot{buf: mem[i*o.BufferSize : (i+1)*o.BufferSize : (i+1)*o.BufferSize]})
		}
		if reg, ok := q.(direct.BufferRegistrar); ok {
			ap.fixed = reg.RegisterBuffers([][]byte{mem}) == nil // refused: plain requests
		}
	}
	ap.slots[0].state = filling
	ap.grow = ap.grow && !copyOnWrite(f)
	return ap, nil
}

// Queue returns the queue the Appender writes through, for readers of the
// same file to share: it is safe for concurrent use.
func (a *Appender) Queue() direct.Queue { return a.q }

// Fixed reports whether the buffers are registered with the engine.
func (a *Appender) Fixed() bool { return a.fixed }

// BufferSize returns the size of the buffers.
func (a *Appender) BufferSize() int { return a.bufSize }

// Size returns the number of bytes appended.
func (a *Appender) Size() int64 { return a.size }

// Synced returns the logical size made durable by the last successful
// Sync or Close (a Close with NoSync makes nothing durable).
func (a *Appender) Synced() int64 { return a.synced }

// Err returns the sticky error, if any: one that cannot be retried. An
// error that can be retried is not sticky (see retry.go).
func (a *Appender) Err() error { return a.err }

// Write appends p. It waits for the device only when the next buffer is
// in flight. After an error that cannot be retried it returns that error
// forever; after one that can, the bytes it counted as written are kept,
// and the next call writes again what failed before it appends.
func (a *Appender) Write(p []byte) (int, error) {
	a.meter.Asked(direct.OpWrite, len(p))
	return a.writeAll(p)
}

// WriteTrailer is Write for the end of the record WriteRecord just
// appended, written apart (blobio's seal of a large blob): its bytes
// count with that record's, not as a call of their own.
func (a *Appender) WriteTrailer(p []byte) (int, error) {
	a.meter.AskedMore(direct.OpWrite, len(p))
	return a.writeAll(p)
}

// writeAll appends p, retrying by the RetryPolicy.
func (a *Appender) writeAll(p []byte) (int, error) {
	n, err := a.write(p)
	for try := 0; err != nil && a.again(err, &try); {
		var k int
		k, err = a.write(p[n:])
		n += k
	}
	return n, err
}

func (a *Appender) write(p []byte) (int, error) {
	if err := a.recover(); err != nil {
		return 0, err
	}
	written := 0
	for len(p) > 0 {
		s := &a.slots[a.cur]
		k := copy(s.buf[s.n:], p) // past s.n: no reader looks there
		a.mu.Lock()
		s.n += k
		a.size += int64(k)
		a.mu.Unlock()
		written += k
		p = p[k:]
		if s.n == len(s.buf) {
			if err := a.rotate(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// WriteRecord appends hdr and then p, and returns the offset of hdr: one
// framed record, such as a blob, with no copy to join the two.
//
// A record is appended whole or not at all: when a failure cuts it short,
// its bytes are withdrawn (rewind) and the stream ends at the record
// before, so that a retry never leaves half a record in the file.
func (a *Appender) WriteRecord(hdr, p []byte) (off int64, err error) {
	a.meter.Asked(direct.OpWrite, len(hdr)+len(p))
	off, err = a.writeRecord(hdr, p)
	for try := 0; err != nil && a.again(err, &try); {
		off, err = a.writeRecord(hdr, p)
	}
	return off, err
}

func (a *Appender) writeRecord(hdr, p []byte) (off int64, err error) {
	off = a.size
	if a.writeSmall(hdr, p) {
		return off, nil
	}
	if err := a.recover(); err != nil {
		return 0, err
	}
	off = a.size
	if _, err := a.write(hdr); err != nil {
		return 0, a.rewind(off, err)
	}
	if _, err := a.write(p); err != nil {
		return 0, a.rewind(off, err)
	}
	return off, nil
}

// rotate queues the full current buffer for writing and makes the next one
// in ring order current. The pending run of full buffers goes out as one
// merged write when it reaches MaxWrite (a cut of the ring), when
// the next buffer cannot extend it (the end of the slab, a pool's buffer),
// or before waiting for the next buffer, so that the device works while we
// wait. When a write it reaps failed, rotate returns the error and leaves
// the current buffer full: recover writes both again and moves on.
func (a *Appender) rotate() error {
	s := &a.slots[a.cur]
	a.mu.Lock()
	s.state = pending
	a.mu.Unlock()
	end := s.off + int64(s.n)
	nx, err := a.next()
	if err != nil {
		return err
	}
	if (a.cur+1)%a.mergeSlots == 0 || nx != a.cur+1 || a.slots[nx].state != idle {
		if err := a.submit(a.first, a.cur+1); err != nil {
			return err
		}
		a.first = nx
	}
	for a.slots[nx].state == busy {
		if err := a.reap(); err != nil {
			return err // reported where it is found; recover takes it from here
		}
	}
	if a.slots[nx].state != idle {
		return a.fatal(fmt.Errorf("appender: buffer %d is %d, not idle", nx, a.slots[nx].state))
	}
	a.mu.Lock()
	a.cur = nx
	t := &a.slots[nx]
	t.state, t.off, t.n = filling, end, 0
	a.mu.Unlock()
	return nil
}

// next returns the slot after the current one in ring order, taking one
// more buffer from a shared pool while the budget allows.
func (a *Appender) next() (int, error) {
	nx := a.cur + 1
	if nx < len(a.slots) {
		return nx, nil
	}
	if a.pool != nil && len(a.slots) < cap(a.slots) {
		b, ok, err := a.pool.TryGet()
		if err != nil {
			return 0, a.fatal(err)
		}
		if ok {
			a.mu.Lock()
			a.slots = append(a.slots, slot{buf: b.Bytes(), pooled: b})
			a.mu.Unlock()
			return nx, nil
		}
	}
	return 0, nil
}

// submit writes slots [i, j) as one request: they are adjacent in memory
// and in the file, all full but the last, which is padded to the alignment.
func (a *Appender) submit(i, j int) error {
	r, err := a.request(i, j)
	if err != nil {
		return err
	}
	if err := a.q.Submit(r); err != nil {
		return a.fatal(err)
	}
	a.submitted(i, j, r)
	return nil
}

// request returns the write of slots [i, j), the last padded to the
// alignment, once the file has grown to hold it.
func (a *Appender) request(i, j int) (direct.Request, error) {
	buf := a.slots[i].buf
	if j-i > 1 {
		buf = a.slab.Bytes()[i*a.bufSize : j*a.bufSize]
	}
	n := (j-1-i)*a.bufSize + a.slots[j-1].n
	padded := a.padTail(buf, n)
	off := a.slots[i].off
	if err := a.growTo(off + int64(padded)); err != nil {
		return direct.Request{}, err
	}
	return direct.Request{Op: direct.OpWrite, Buf: buf[:padded], Off: off, Token: uint64(i), Done: a.done}, nil
}

// submitted records that r, the write of slots [i, j), is in flight.
func (a *Appender) submitted(i, j int, r direct.Request) {
	a.mu.Lock()
	for k := i; k < j; k++ {
		a.slots[k].state = busy
	}
	a.mu.Unlock()
	a.slots[i].span = j - i
	a.inflight++
	a.fileSize = max(a.fileSize, r.Off+int64(len(r.Buf)))
}

// growTo makes the file at least end bytes long, in steps that grow with
// the file, so that writes land inside it. Growing ahead is an
// optimisation, never the reason a write fails: when the disk has no room
// for the step it takes what this write needs, and when it has none for
// that either it lets the write extend the file, so that the write itself
// says whether the data fits.
func (a *Appender) growTo(end int64) error {
	if !a.grow || end <= a.fileSize {
		return nil
	}
	target := max(end, a.fileSize+min(max(a.fileSize, minGrowth), maxGrowth))
	err := a.f.Allocate(a.fileSize, target-a.fileSize)
	if retryable(err) && target > end {
		target = end
		err = a.f.Allocate(a.fileSize, target-a.fileSize)
	}
	if errors.Is(err, errors.ErrUnsupported) {
		err = a.f.Truncate(target)
	}
	if retryable(err) {
		// ext4 may have grown the file by the part it could allocate:
		// Close cuts it back whatever fileSize says.
		a.longer = true
		return nil
	}
	if err != nil {
		return a.fatal(err)
	}
	a.fileSize = target
	return nil
}

// reap waits for one write to complete and frees its slots. The slots of
// a failed write are marked lost: their bytes stay in memory, never
// reused until recover has written them.
func (a *Appender) reap() error {
	c := a.q.Await(a.done)
	i := int(c.Token)
	state := idle
	if c.Err != nil {
		state = lost
	}
	a.mu.Lock()
	for k := i; k < i+a.slots[i].span; k++ {
		a.slots[k].state = state
	}
	a.mu.Unlock()
	a.inflight--
	if c.Err != nil {
		return a.fail(c.Err)
	}
	return nil
}

// wait waits for every write in flight, and reports the first error.
func (a *Appender) wait() error {
	var err error
	for a.inflight > 0 {
		if e := a.reap(); err == nil {
			err = e
		}
	}
	if a.err != nil {
		return a.err
	}
	return err
}

// fail records err, an I/O error: one that can be retried as the fault
// recover answers, any other as the sticky error.
func (a *Appender) fail(err error) error {
	if a.err != nil {
		return a.err
	}
	if retryable(err) {
		a.fault = err
		return err
	}
	return a.fatal(err)
}

// fatal makes err the sticky error, unless there is one already.
func (a *Appender) fatal(err error) error {
	if a.err == nil {
		a.err = err
	}
	return a.err
}

// Flush writes everything appended so far, the partial last buffer padded
// to the alignment, and waits for it. It does not fdatasync.
func (a *Appender) Flush() error {
	err := a.flush(true)
	for try := 0; err != nil && a.again(err, &try); {
		err = a.flush(true)
	}
	return err
}

// flush is Flush; refit says whether to drop the aligned part of the
// last buffer once written. Sync refits only after the fdatasync
// succeeded, so that a failed one finds those bytes still in memory.
func (a *Appender) flush(refit bool) error {
	if err := a.recover(); err != nil {
		return err
	}
	s := &a.slots[a.cur]
	end := a.cur
	if s.n > 0 {
		end++
	}
	if end > a.first {
		if err := a.submit(a.first, end); err != nil {
			return err
		}
	}
	if err := a.wait(); err != nil {
		return err
	}
	a.first = a.cur
	a.mu.Lock()
	defer a.mu.Unlock()
	s.state = filling
	if refit {
		a.refit(s)
	}
	return nil
}

// Sync flushes and makes the data durable with fdatasync, and a size that
// covers it: the file may run past the logical size (grown ahead, or the
// padding of the last block) until Close. A Sync that fails with an error
// that can be retried keeps every byte past Synced that is still in
// memory to write again: the next Sync writes them and fdatasyncs anew.
func (a *Appender) Sync() error {
	err := a.syncOnce()
	for try := 0; err != nil && a.again(err, &try); {
		err = a.syncOnce()
	}
	return err
}

func (a *Appender) syncOnce() error {
	if err := a.flush(false); err != nil {
		return err
	}
	if err := a.sync(); err != nil {
		return err
	}
	a.synced = a.size
	a.mu.Lock()
	a.refit(&a.slots[a.cur])
	a.mu.Unlock()
	return nil
}

// sync fdatasyncs the file in the caller's thread, once Flush has seen
// every write complete, not through the queue: io_uring cannot issue an
// fsync without blocking, so it runs it on one of its io-wq worker
// threads, a hop there and back that made a Sync after every 150-byte
// record cost 290 µs against 163 µs on the pwrite engine
// (BenchmarkSyncEvery/n=1, ext4 on virtio).
func (a *Appender) sync() error {
	if a.resync {
		a.meter.WriterRetried() // the fdatasync that failed, made again
		a.resync = false
	}
	if err := a.f.Sync(); err != nil {
		return a.syncFailed(err)
	}
	return nil
}

// Close flushes, truncates the file to its logical size, fdatasyncs (unless
// Options.NoSync), closes the file and returns the buffers. Bytes a
// failed write or Sync left to write again are written first (and, with
// a Retry policy, retried until its Context ends). It reports the
// first error on the way; the buffers and the file are released whatever
// happens. A Close that fails cuts the file back to Synced: what grew
// ahead, padding and bytes never made durable go, so the file holds
// exactly what the last successful Sync acknowledged, never a tail of
// zeros.
func (a *Appender) Close() error {
	err := a.closeOnce()
	for try := 0; err != nil && a.again(err, &try); {
		err = a.closeOnce()
	}
	a.release() // after it no write is in flight that could extend the file again
	a.meter.Close()
	if err != nil {
		// Best effort: the error to report is the first one. The cut is
		// made durable too, or a power cut could bring the tail back.
		a.cutBack()
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// closeOnce is what Close does before it releases the file: everything
// written, cut to the logical size and made durable.
func (a *Appender) closeOnce() error {
	err := a.flush(false)
	if err == nil {
		err = a.trimTo(a.size)
	}
	if err == nil && !a.noSync {
		if err = a.sync(); err == nil {
			a.synced = a.size
		}
	}
	return err
}

// Discard drops what has not been written, waits for the writes in flight,
// returns the buffers and closes the file: for a temporary file whose
// contents die with it.
func (a *Appender) Discard() error {
	a.wait()
	a.release()
	a.meter.Close()
	return a.f.Close()
}

// Cached returns the bytes of the stream at off that are in memory: in the
// buffer being filled, waiting to be written, in flight, kept after a
// failed write, or written and not yet reused. When off
// is not in memory it returns nil and where the next buffered stretch
// starts (or Size), so the caller reads [off, next) from the file.
func (a *Appender) Cached(off int64) (mem []byte, next int64) {
	next = a.size
	for i := range a.slots {
		s := &a.slots[i]
		if s.n == 0 {
			continue
		}
		if s.off <= off && off < s.off+int64(s.n) {
			return s.buf[off-s.off : s.n], 0
		}
		if s.off > off {
			next = min(next, s.off)
		}
	}
	return nil, next
}

// release closes the queue (waiting for anything in flight) and gives the
// buffers back.
func (a *Appender) release() {
	if a.q != nil {
		a.q.Close()
		a.q = nil
	}
	a.mu.Lock()
	slots := a.slots
	a.slots = nil
	a.mu.Unlock()
	for i := range slots {
		if b := slots[i].pooled; b != nil {
			a.pool.Put(b)
		}
	}
	if a.slab != nil {
		a.slab.Free()
		a.slab = nil
	}
}
