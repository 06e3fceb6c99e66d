//go:build unix

package pebblefs

// TEMPORARY: stands in for fileio until issue22 lands.

import (
	"bufio"
	"os"

	"golang.org/x/sys/unix"
)

type shimWriter struct {
	f            *os.File
	bw           *bufio.Writer
	size, synced int64
}

func (fs *FS) newWriter(name string) (fileWriter, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &shimWriter{f: f, bw: bufio.NewWriterSize(f, 64<<10)}, nil
}

func (w *shimWriter) Write(p []byte) (int, error) {
	n, err := w.bw.Write(p)
	w.size += int64(n)
	return n, err
}
func (w *shimWriter) Sync() error {
	if err := w.bw.Flush(); err != nil {
		return err
	}
	if err := unix.Fdatasync(int(w.f.Fd())); err != nil {
		return err
	}
	w.synced = w.size
	return nil
}
func (w *shimWriter) Synced() int64 { return w.synced }
func (w *shimWriter) Size() int64   { return w.size }
func (w *shimWriter) Fd() uintptr   { return w.f.Fd() }
func (w *shimWriter) Close() error {
	err := w.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

type shimReader struct {
	*os.File
	size int64
}

func (fs *FS) newReader(name string, size int64, seq bool) (fileReader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	if size == 0 {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		size = fi.Size()
	}
	return &shimReader{File: f, size: size}, nil
}
func (r *shimReader) Size() int64 { return r.size }
