package direct

import (
	"errors"
	"fmt"
	"path/filepath"
)

// ErrURingAvoided reports a filesystem on which dio does not use io_uring
// although the kernel offers it.
var ErrURingAvoided = errors.New("io_uring avoided on this filesystem")

// URingErrorAt is URingError for a file at path: it also rules io_uring
// out on btrfs. There every O_DIRECT read and some writes are punted to
// io_uring's io-wq worker threads, so the ring saves nothing over pwrite on
// a worker goroutine, and on Linux 6.18 a punted read was seen to wait for
// a worker that never came (about 1 run in 40 of the blobio tests, traced
// to work queued just as the thread's previous ring was closed).
func URingErrorAt(path string) error {
	if err := URingError(); err != nil {
		return err
	}
	fs, err := Filesystem(path)
	if err != nil {
		fs, err = Filesystem(filepath.Dir(path))
	}
	if err == nil && fs == "btrfs" {
		return fmt.Errorf("%w: btrfs punts O_DIRECT I/O to io-wq workers, where reads were seen to hang", ErrURingAvoided)
	}
	return nil
}
