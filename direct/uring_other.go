//go:build !linux

package direct

import (
	"errors"
	"runtime"
)

var errNoURing = errors.New("io_uring: not available on " + runtime.GOOS)

func newURingQueue(xfer, int) (Queue, error) { return nil, errNoURing }

// URingError reports why EngineAuto would not use io_uring.
func URingError() error { return errNoURing }
