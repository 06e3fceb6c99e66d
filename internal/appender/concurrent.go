package appender

import "sync"

// The hook for concurrent readers (Options.Lock). The Appender takes the
// lock around each change to what Cached and Size report: a slot's off, n
// and state, the slot list, the size, and the refit's move of the tail.
// It never holds it across a device wait, a Submit or an allocation, so a
// reader holding it only waits for a few stores and at most a copy of one
// block's tail. Bytes appended are copied into the filling buffer before
// the lock publishes them (past n, where no reader looks), and a buffer is
// reused only after the lock marks it filling with n = 0, so a reader that
// copies from Cached's slice while holding the lock never sees a byte
// change under it.

// noLock is the Locker of an Appender without Options.Lock.
type noLock struct{}

func (noLock) Lock()   {}
func (noLock) Unlock() {}

func lockerOr(l sync.Locker) sync.Locker {
	if l == nil {
		return noLock{}
	}
	return l
}

// writeSmall appends hdr and p when both fit the filling buffer without
// filling it, publishing them under the lock once instead of twice (a
// blob of 100 bytes costs about 200 ns, and a lock pair 20). It reports
// whether it did.
func (a *Appender) writeSmall(hdr, p []byte) bool {
	s := &a.slots[a.cur]
	k := len(hdr) + len(p)
	if a.err != nil || a.fault != nil || k >= len(s.buf)-s.n {
		return false
	}
	copy(s.buf[s.n:], hdr)
	copy(s.buf[s.n+len(hdr):], p)
	a.mu.Lock()
	s.n += k
	a.size += int64(k)
	a.mu.Unlock()
	return true
}
