//go:build !linux

package direct

import (
	"errors"
	"io"
	"os"
	"runtime"

	"github.com/ncw/directio"
)

// openDirect opens with F_NOCACHE on darwin and FILE_FLAG_NO_BUFFERING on
// windows, through ncw/directio.
func openDirect(name string, flag int, perm os.FileMode) (*os.File, error) {
	return directio.OpenFile(name, flag, perm)
}

// discover has no portable query outside Linux; 4096 satisfies both the
// sector rule of FILE_FLAG_NO_BUFFERING and darwin's page-sized transfers.
func discover(*os.File) (Alignment, Source) {
	return Alignment{Memory: DefaultAlignment, Offset: DefaultAlignment}, SourceDefault
}

// BlockDevice describes the block device under a filesystem.
type BlockDevice struct {
	Name              string
	Logical, Physical int
}

// BlockDeviceOf is only implemented on Linux.
func BlockDeviceOf(string) (BlockDevice, bool) { return BlockDevice{}, false }

func unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// The calls go through os.File's own methods, which hold its reference
// count: a closed file fails with os.ErrClosed.

func (x *xfer) preadOnce(p []byte, off int64) (int, error) {
	n, err := x.f.ReadAt(p, off)
	if err == io.EOF {
		return n, nil // the caller sees the short count
	}
	return n, unwrap(err)
}

func (x *xfer) pwriteOnce(p []byte, off int64) (int, error) {
	if x.writeFlags != 0 {
		return 0, errors.ErrUnsupported // RWF_* flags are Linux's
	}
	n, err := x.f.WriteAt(p, off)
	return n, unwrap(err)
}

func (x *xfer) fdatasync() error { return unwrap(x.f.Sync()) }

func (f *File) fallocate(int64, int64) error { return errors.ErrUnsupported }

// Filesystem is only implemented on Linux; elsewhere it names the OS.
func Filesystem(string) (string, error) { return runtime.GOOS, nil }
