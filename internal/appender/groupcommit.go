package appender

import "github.com/dio-storage/dio/aligned"

// The methods below let a caller make the data durable outside the lock
// that guards the Appender (group commit): under the lock it calls FlushKeep
// and notes Size, without the lock it calls SyncData while other
// goroutines go on appending, and under the lock again MarkSynced or Fail.
// Every write Flush waited for is covered by the fdatasync that SyncData
// starts after it. The caller runs one SyncData at a time, never beside
// Close.

// SyncData fdatasyncs the file in the caller's thread (as Sync does), so
// that it runs while the Appender is used by another goroutine. It
// changes nothing in the Appender.
func (a *Appender) SyncData() error { return a.f.Sync() }

// FlushKeep is Flush without its refit: the written part of the last
// buffer stays in memory until MarkSynced says it is durable, so that a
// SyncData that fails finds it there to write again (syncFailed).
func (a *Appender) FlushKeep() error {
	err := a.flush(false)
	for try := 0; err != nil && a.again(err, &try); {
		err = a.flush(false)
	}
	return err
}

// MarkSynced records that the logical size size is durable, and drops
// from the buffer being filled the whole blocks below it, which
// FlushKeep kept.
func (a *Appender) MarkSynced(size int64) {
	a.synced = max(a.synced, size)
	s := &a.slots[a.cur]
	if s.state != filling || size <= s.off {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if whole := int(aligned.Down(min(size-s.off, int64(s.n)), int64(a.align))); whole > 0 {
		copy(s.buf, s.buf[whole:s.n])
		s.off += int64(whole)
		s.n -= whole
	}
}

// Fail records err, the error of a SyncData, as Sync records its own
// (syncFailed): one that can be retried keeps the bytes past Synced that
// the buffers hold to write again, any other is sticky. It returns the
// error the caller reports.
func (a *Appender) Fail(err error) error { return a.syncFailed(err) }
