package appender

import "github.com/dio-storage/dio/direct"

// The methods below let a caller make the data durable outside the lock
// that guards the Appender (group commit): under the lock it calls Flush
// and notes Size, without the lock it calls SyncData while other
// goroutines go on appending, and under the lock again MarkSynced or Fail.
// Every write Flush waited for is covered by the fdatasync that SyncData
// starts after it. The caller runs one SyncData at a time, never beside
// Close.

// SyncData fdatasyncs the file through the queue, on a completion
// channel of its own, so that it runs while the Appender is used by
// another goroutine. It changes nothing in the Appender.
func (a *Appender) SyncData() error {
	done := make(chan direct.Completion, 1)
	if err := a.q.Submit(direct.Request{Op: direct.OpSync, Done: done}); err != nil {
		return err
	}
	return a.q.Await(done).Err
}

// MarkSynced records that the logical size size is durable.
func (a *Appender) MarkSynced(size int64) { a.synced = max(a.synced, size) }

// Fail makes err the sticky error, unless there is one already, and
// returns the sticky error: after a failed fdatasync no write is trusted.
func (a *Appender) Fail(err error) error { return a.fail(err) }
