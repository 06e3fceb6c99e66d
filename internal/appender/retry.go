package appender

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// Failures survived. A write that fails with ENOSPC, EDQUOT or EIO, a
// full disk, a quota or a device error that may pass, costs no byte the
// caller was told was written: the buffers of the failed write are marked
// lost and never reused until they are written again (reap), and the
// error is the fault, not the sticky error. The next call (Write,
// WriteRecord, Flush, Sync, Close) first writes every lost buffer again
// (recover); when the cause is gone that succeeds and the Appender goes
// on as if nothing happened, and when it is not the call returns the
// error again, having appended nothing.
//
// An fdatasync that fails so is a fault too (syncFailed): the bytes past
// Synced that are still in the buffers are marked lost, so that the next
// Sync writes them again before it fdatasyncs. That is the promise the
// page cache cannot make: after a failed fsync the kernel may have
// dropped the dirty pages or marked them clean (PostgreSQL's "fsyncgate",
// 2018), so a retried fsync can succeed while the data is gone. dio's
// bytes are in its own buffers. A failed fdatasync whose bytes are no
// longer all in the buffers (the ring went round since the last Sync)
// cannot be retried honestly and is sticky, with O_DIRECT too: the
// writes that completed went to the device, but a device's volatile
// cache loses them when its flush fails, and the retried flush then
// succeeds without them (crashtest's TestFlushFailureInCommit saw a
// retried Sync return nil on ext4 with the second MiB and the file's
// size gone after a remount).
//
// Errors that say the request itself was wrong (EINVAL, an unaligned
// write, a closed file or queue, a Pool that failed) stay sticky: writing
// the same bytes again would fail the same way.

// retryable reports whether err is a failure after which writing the
// same bytes again may succeed.
func retryable(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EIO)
}

// recover writes again, one buffer per request (rewrite), every buffer
// a failed write or Sync left lost and every full one not yet written,
// waits for them, and makes the first buffer that is not full the one being filled.
// It returns nil, or the error that still stands.
func (a *Appender) recover() error {
	if a.err != nil {
		return a.err
	}
	if a.fault == nil {
		return nil
	}
	a.wait()
	if a.err != nil {
		return a.err
	}
	a.fault = nil
	if err := a.rewrite(); err != nil {
		a.wait() // those accepted
		return err
	}
	if err := a.wait(); err != nil {
		return err
	}
	c := &a.slots[a.cur]
	a.mu.Lock()
	c.state = filling
	a.mu.Unlock()
	a.first = a.cur
	if c.n < len(c.buf) {
		return nil
	}
	// The buffer was full when the rotate that failed was to leave it.
	end := c.off + int64(c.n)
	nx, err := a.next()
	if err != nil {
		return err
	}
	a.mu.Lock()
	c.state = idle
	a.cur, a.first = nx, nx
	t := &a.slots[nx]
	t.state, t.off, t.n = filling, end, 0
	a.mu.Unlock()
	return nil
}

// rewrite submits every buffer that is lost, or full and not yet
// written, one buffer per request, all of them together: one
// io_uring_enter per Depth of them on the io_uring engine
// (direct.SubmitBatch), where a failed Sync after a ring's worth of
// writes leaves a ring's worth to write again. The buffers of requests
// the queue refuses are not submitted; the refusal, an error the
// Appender cannot retry, is sticky; recover waits for the writes
// accepted either way.
func (a *Appender) rewrite() error {
	var rs []direct.Request
	var rerr error
	for i := range a.slots {
		s := &a.slots[i]
		if i == a.cur && s.n < len(s.buf) {
			continue // the next flush writes it, as it writes every tail
		}
		if s.state == lost || s.state == pending {
			r, err := a.request(i, i+1)
			if err != nil {
				rerr = err // submit what is ready, then report it
				break
			}
			rs = append(rs, r)
		}
	}
	n, err := direct.SubmitBatch(a.q, rs)
	for _, r := range rs[:n] {
		i := int(r.Token)
		if a.slots[i].state == lost {
			a.meter.WriterRetried()
		}
		a.submitted(i, i+1, r)
	}
	if err != nil {
		return a.fatal(err)
	}
	return rerr
}

// rewind withdraws what a record cut short by cause appended past off,
// its start, so that the stream ends at the record before: the buffer
// holding off becomes the one being filled, holding the bytes before off,
// and the buffers past it are emptied. It returns cause, or a sticky
// error when the bytes before off are no longer in memory (a record
// longer than the ring).
func (a *Appender) rewind(off int64, cause error) error {
	if a.err != nil {
		return a.err
	}
	if !retryable(cause) {
		return a.fatal(cause)
	}
	a.wait()
	if a.err != nil {
		return a.err
	}
	k := -1
	for i := range a.slots {
		s := &a.slots[i]
		if s.off <= off && off < s.off+int64(len(s.buf)) && off-s.off <= int64(s.n) && (k < 0 || s.n > a.slots[k].n) {
			k = i
		}
	}
	if k < 0 {
		return a.fatal(fmt.Errorf("appender: a record at %d failed and its start is no longer in memory: %w", off, cause))
	}
	a.mu.Lock()
	for i := range a.slots {
		if s := &a.slots[i]; i != k && s.n > 0 && s.off >= off {
			s.state, s.n = idle, 0
		}
	}
	s := &a.slots[k]
	s.n, s.state = int(off-s.off), filling
	a.cur, a.first, a.size = k, k, off
	a.mu.Unlock()
	return cause
}

// syncFailed handles an fdatasync that failed with err: one that can be
// retried marks the bytes past Synced that the buffers still hold lost,
// so that the next call writes them again; through the page cache, when
// the buffers no longer hold all of them, or for any other error, err is
// sticky.
func (a *Appender) syncFailed(err error) error {
	if a.err != nil {
		return a.err
	}
	if !retryable(err) {
		return a.fatal(err)
	}
	a.resync = true
	lo := a.size
	for i := range a.slots {
		if s := &a.slots[i]; s.n > 0 {
			lo = min(lo, s.off)
		}
	}
	if lo > aligned.Down(a.synced, int64(a.align)) {
		return a.fatal(fmt.Errorf("appender: %w, and the bytes from %d to %d, written since the last Sync, are no longer in memory to write again", err, a.synced, lo))
	}
	a.mu.Lock()
	for i := range a.slots {
		if s := &a.slots[i]; i != a.cur && s.n > 0 && s.state == idle && s.off+int64(s.n) > a.synced {
			s.state = lost
		}
	}
	a.mu.Unlock()
	a.fault = err
	return err
}

// RetryPolicy makes an Appender retry internally, as Neon's
// BufferedWriter does, instead of returning an error it can retry
// (ENOSPC, EDQUOT, EIO): the call that met it waits, with a backoff that
// doubles from MinDelay to MaxDelay, and tries again, until it succeeds
// or Context ends. Each failure is reported to OnRetry before the wait.
// When Context ends the call returns the last failure (the Appender
// still holds the bytes, as without a policy). Errors that cannot be
// retried are returned at once.
type RetryPolicy struct {
	Context  context.Context // retrying stops when it is done; nil: never
	OnRetry  func(err error) // told of every failure about to be retried; nil: nobody
	MinDelay time.Duration   // the first wait; 0: DefaultMinDelay
	MaxDelay time.Duration   // the longest wait; 0: DefaultMaxDelay
}

// The default backoff: Neon's BufferedWriter retries its flushes with
// backoff from 100 ms; a full disk freed by an operator takes seconds,
// a transient device error milliseconds.
const (
	DefaultMinDelay = 10 * time.Millisecond
	DefaultMaxDelay = time.Second
)

// again, under a RetryPolicy, reports err and waits before the try-th
// retry; it returns false, at once, when err is not to be retried or the
// policy's Context is done.
func (a *Appender) again(err error, try *int) bool {
	r := a.retry
	if r == nil || a.err != nil || !retryable(err) {
		return false
	}
	ctx := r.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if ctx.Err() != nil {
		return false
	}
	if r.OnRetry != nil {
		r.OnRetry(err)
	}
	lo, hi := r.MinDelay, r.MaxDelay
	if lo <= 0 {
		lo = DefaultMinDelay
	}
	if hi <= 0 {
		hi = DefaultMaxDelay
	}
	d := lo << min(*try, 30)
	if d <= 0 || d > hi {
		d = max(hi, lo)
	}
	*try++
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
