package appender

// The methods below let a caller make the data durable outside the lock
// that guards the Appender (group commit): under the lock it calls Flush
// and notes Size, without the lock it calls SyncData while other
// goroutines go on appending, and under the lock again MarkSynced or Fail.
// Every write Flush waited for is covered by the fdatasync that SyncData
// starts after it. The caller runs one SyncData at a time, never beside
// Close.

// SyncData fdatasyncs the file in the caller's thread (as Sync does), so
// that it runs while the Appender is used by another goroutine. It
// changes nothing in the Appender.
func (a *Appender) SyncData() error { return a.f.Sync() }

// MarkSynced records that the logical size size is durable.
func (a *Appender) MarkSynced(size int64) { a.synced = max(a.synced, size) }

// Fail makes err the sticky error, unless there is one already, and
// returns the sticky error: after a failed fdatasync no write is trusted.
func (a *Appender) Fail(err error) error { return a.fail(err) }
