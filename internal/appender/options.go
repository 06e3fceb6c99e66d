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

// optionsError is an error matching ErrInvalid.
type optionsError struct{ reason string }

func (e *optionsError) Error() string        { return "invalid options: " + e.reason }
func (e *optionsError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &optionsError{reason: fmt.Sprintf(format, args...)}
}

// WrapInvalid rewords an error matching ErrInvalid under the caller's
// sentinel, "blobio: invalid options: Buffers is -1", so that it matches
// sentinel and no longer ErrInvalid; any other error is returned as it is.
func WrapInvalid(err, sentinel error) error {
	var oe *optionsError
	if errors.As(err, &oe) {
		return fmt.Errorf("%w: %s", sentinel, oe.reason)
	}
	return err
}

// maxBuffers is the most buffers an Appender owns: IORING_MAX_ENTRIES
// (include/uapi/linux/io_uring.h), as a ring cannot have more writes in
// flight than its queue has entries.
const maxBuffers = 32768

// Validate checks what it can of o before a file exists: no negative
// size or count, at most maxBuffers buffers, and a ring whose size fits
// in an int. New checks the rest against the file (a Pool's buffers
// against its alignment). The error matches ErrInvalid.
func (o Options) Validate() error {
	size := o.BufferSize
	if size == 0 {
		size = aligned.DefaultBufferSize
	}
	switch {
	case o.BufferSize < 0:
		return invalid("BufferSize is %d", o.BufferSize)
	case o.Buffers < 0:
		return invalid("Buffers is %d", o.Buffers)
	case o.Buffers > maxBuffers:
		return invalid("Buffers is %d, at most %d", o.Buffers, maxBuffers)
	case o.MaxWrite < 0:
		return invalid("MaxWrite is %d", o.MaxWrite)
	case size > math.MaxInt/2/max(o.Buffers, DefaultBuffers):
		// Half, for rounding the buffer size up to an alignment.
		return invalid("%d buffers of %d bytes do not fit in memory", o.Buffers, o.BufferSize)
	}
	return nil
}
