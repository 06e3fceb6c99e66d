package appender

import (
	"errors"
	"fmt"
	"math"

	"github.com/dio-storage/dio/aligned"
)

// ErrInvalid is matched by the errors Validate and New return for Options
// no file can take. The errors name no package: blobio and ephemeral
// report them under their own sentinels through WrapInvalid.
var ErrInvalid = errors.New("invalid options")

// optionsError is an error matching ErrInvalid, and what caused it
// (err, when a system call refused what the Options asked for).
type optionsError struct {
	reason string
	err    error
}

func (e *optionsError) Error() string        { return "invalid options: " + e.reason }
func (e *optionsError) Is(target error) bool { return target == ErrInvalid }
func (e *optionsError) Unwrap() error        { return e.err }

func invalid(format string, args ...any) error {
	return &optionsError{reason: fmt.Sprintf(format, args...)}
}

// WrapInvalid rewords an error matching ErrInvalid under the caller's
// sentinel, "blobio: invalid options: Buffers is -1", so that it matches
// sentinel (and the system call's error it wraps, if any) and no longer
// ErrInvalid; any other error is returned as it is.
func WrapInvalid(err, sentinel error) error {
	var oe *optionsError
	if !errors.As(err, &oe) {
		return err
	}
	if oe.err != nil {
		return fmt.Errorf("%w: %s: %w", sentinel, oe.reason, oe.err)
	}
	return fmt.Errorf("%w: %s", sentinel, oe.reason)
}

// MaxBuffers is the most buffers an Appender owns: IORING_MAX_ENTRIES
// (include/uapi/linux/io_uring.h), as a ring cannot have more writes in
// flight than its queue has entries.
const MaxBuffers = 32768

// MaxBufferSize, 256 MiB, is the largest buffer an Appender takes
// (BufferSize, or a Pool's buffers). One buffer is one write: it must fit
// an io_uring SQE's 32-bit length and Linux's MAX_RW_COUNT (2 GiB less a
// page), the most one write(2) or SQE moves; past those a write would
// only ever be resumed short. 256 MiB is far below both, 4096 times the
// default, and the blob format's own limit (a blob holds at most
// 0x0fff_ffff bytes): a larger buffer buys no throughput (Neon's gain
// stopped at 64 KiB) and costs Buffers times its size in memory.
const MaxBufferSize = 256 << 20

// Validate checks what it can of o before a file exists: a known I/O
// policy, no negative size or count, no buffer (BufferSize or a Pool's)
// over MaxBufferSize, at most MaxBuffers buffers, and a ring whose size
// fits in an int. New checks the rest against the file (a Pool's buffers
// against its alignment). The error matches ErrInvalid.
func (o Options) Validate() error {
	size := o.BufferSize
	if size == 0 {
		size = aligned.DefaultBufferSize
	}
	switch {
	case !o.IO.Valid():
		return invalid("unknown I/O policy %v", o.IO)
	case o.BufferSize < 0:
		return invalid("BufferSize is %d", o.BufferSize)
	case o.BufferSize > MaxBufferSize:
		return invalid("BufferSize is %d, at most %d (256 MiB)", o.BufferSize, MaxBufferSize)
	case o.Pool != nil && o.Pool.BufferSize() > MaxBufferSize:
		return invalid("the Pool's buffers are %d bytes, at most %d (256 MiB)", o.Pool.BufferSize(), MaxBufferSize)
	case o.Buffers < 0:
		return invalid("Buffers is %d", o.Buffers)
	case o.Buffers > MaxBuffers:
		return invalid("Buffers is %d, at most %d", o.Buffers, MaxBuffers)
	case o.MaxWrite < 0:
		return invalid("MaxWrite is %d", o.MaxWrite)
	case o.Slow != nil && o.Slow.Check() != nil:
		return invalid("Slow: %v", o.Slow.Check())
	case size > math.MaxInt/2/max(o.Buffers, DefaultBuffers):
		// Half, for rounding the buffer size up to an alignment.
		return invalid("%d buffers of %d bytes do not fit in memory", o.Buffers, o.BufferSize)
	}
	return nil
}
