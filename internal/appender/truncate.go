package appender

import (
	"sync"

	"github.com/dio-storage/dio/fallback"
)

// truncFile is the file Create and OpenAppend give an Appender, with one
// change: after a Truncate to a size inside a block, the next Sync that
// succeeds drops that block from the page cache. xfs zeroes the rest of the block
// past the new end through the page cache (iomap's truncate_page), so
// every file an Appender closed kept its last page cached there (measured on
// the matrix's xfs, 4 KiB sectors: one page per file); the page is dirty
// until the fdatasync that follows, and only a clean one can be dropped.
type truncFile struct {
	fallback.File
	mu    sync.Mutex
	dirty int64 // the offset of the block to drop, or -1
}

func newTruncFile(f fallback.File) *truncFile { return &truncFile{File: f, dirty: -1} }

func (f *truncFile) Truncate(size int64) error {
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	if f.Mode().Direct && size%pageSize != 0 {
		f.mu.Lock()
		f.dirty = size - size%pageSize
		f.mu.Unlock()
	}
	return nil
}

func (f *truncFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.mu.Lock()
	off := f.dirty
	f.dirty = -1
	f.mu.Unlock()
	if off >= 0 {
		dropCache(f.Fd(), off, pageSize) // advice: its failure changes nothing
	}
	return nil
}
