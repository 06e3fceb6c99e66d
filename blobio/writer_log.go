package blobio

import "sync"

// A Log is a Writer shared by goroutines that each need their blob
// durable before they go on, as the clients of a write-ahead log do. It
// commits in groups: one fdatasync covers every blob appended before it
// started, and the blobs appended while it runs are covered by the next
// one, so that N goroutines appending at once pay about one fdatasync
// per N blobs instead of one each (PostgreSQL's and etcd's WALs do the
// same). A Log is safe for concurrent use; the Writer is its own from
// NewLog on.
//
// A Log never cuts the file back before Close: while it runs, and after
// a crash, the file may hold zeros grown ahead past the blobs (see
// Crashes in the package doc).
type Log struct {
	mu   sync.Mutex // guards w
	w    *Writer
	turn sync.Mutex // held while a group's fdatasync runs; the rest wait to see if it covered them
}

// NewLog returns a Log appending through w.
func NewLog(w *Writer) *Log { return &Log{w: w} }

// Append appends p as one blob and returns its offset once the blob is
// durable: when it returns nil, Synced covers the blob. The errors are
// WriteBlob's and Sync's: after ENOSPC, EDQUOT or EIO the next Append
// writes the held blobs again (see Failures in the package doc); after
// any other I/O error every later call returns it.
func (l *Log) Append(p []byte) (off int64, err error) {
	l.mu.Lock()
	off, err = l.w.WriteBlob(p)
	end := l.w.Size()
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if err := l.commit(end); err != nil {
		return 0, err
	}
	return off, nil
}

// commit returns once the logical size end is durable, syncing if no
// fdatasync that started after end was written has done it.
func (l *Log) commit(end int64) error {
	l.turn.Lock()
	defer l.turn.Unlock()
	l.mu.Lock()
	if l.w.Synced() >= end {
		l.mu.Unlock()
		return nil // the group before, or Close, covered it
	}
	if l.w.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	ap := l.w.ap
	err := ap.FlushKeep()
	size := ap.Size()
	l.mu.Unlock()
	if err != nil {
		return err
	}
	err = ap.SyncData() // while the next group appends
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return ap.Fail(err)
	}
	ap.MarkSynced(size)
	return nil
}

// Synced returns the logical size made durable so far.
func (l *Log) Synced() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Synced()
}

// Close waits for the fdatasync running, if any, and closes the Writer.
// An Append racing it returns nil if Close made its blob durable, and
// ErrClosed if it came too late to be written.
func (l *Log) Close() error {
	l.turn.Lock()
	defer l.turn.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Close()
}
