//go:build unix

package pebblefs

import "io"

// fileWriter is what a writeFile needs of fileio's Writer.
type fileWriter interface {
	io.Writer
	Sync() error
	Synced() int64
	Size() int64
	Close() error
	Fd() uintptr
}

// fileReader is what a readFile needs of fileio's Reader.
type fileReader interface {
	io.ReaderAt
	Size() int64
	Close() error
	Fd() uintptr
}
