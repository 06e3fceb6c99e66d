package fallback

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/dio-storage/dio/direct"
)

// ErrURingAvoided reports a filesystem on which dio does not use io_uring
// although the kernel offers it.
var ErrURingAvoided = errors.New("fallback: io_uring avoided on this filesystem")

// URingErrorAt is direct.URingError for a file at path, with fallback's
// policy on top, which Open follows in choosing the engine: it also rules
// io_uring out on btrfs. There every O_DIRECT read and some writes are
// punted to io_uring's io-wq worker threads, so the ring saves nothing over
// pwrite on a worker goroutine, and on Linux 6.18 a punted read was seen to
// wait for a worker that never came (about 1 run in 40 of the blobio
// tests, traced to work queued just as the thread's previous ring was
// closed). direct keeps the mechanism (URingError, Filesystem); the choice
// is fallback's.
func URingErrorAt(path string) error {
	if err := direct.URingError(); err != nil {
		return err
	}
	fs, err := direct.Filesystem(path)
	if err != nil {
		fs, err = direct.Filesystem(filepath.Dir(path))
	}
	if err == nil && fs == "btrfs" {
		return fmt.Errorf("%w: btrfs punts O_DIRECT I/O to io-wq workers, where reads were seen to hang", ErrURingAvoided)
	}
	return nil
}
