package direct

import (
	"errors"
	"fmt"
)

var (
	// ErrUnaligned reports an I/O whose buffer address, offset or length
	// breaks the file's Alignment. Errors matching it are *UnalignedError.
	ErrUnaligned = errors.New("direct: unaligned I/O")

	// ErrNotSupported reports a filesystem that refuses O_DIRECT, at open or
	// at the first aligned I/O.
	ErrNotSupported = errors.New("direct: O_DIRECT not supported")

	// ErrNegativeOffset reports a read or write at an offset below zero.
	ErrNegativeOffset = errors.New("direct: negative offset")

	// ErrQueueClosed is returned by Submit after Close.
	ErrQueueClosed = errors.New("direct: queue closed")

	// ErrTooLarge reports a request longer than its engine takes in one
	// piece.
	ErrTooLarge = errors.New("direct: request too large")

	// ErrInvalidAlignment reports an Alignment that cannot be checked
	// against, such as one with a zero field.
	ErrInvalidAlignment = errors.New("direct: invalid alignment")

	// ErrInvalidQueueOptions reports a NewQueue given no file or a
	// QueueOptions.Depth over MaxDepth.
	ErrInvalidQueueOptions = errors.New("direct: invalid queue options")
)

// UnalignedError names the values that broke an alignment rule.
type UnalignedError struct {
	Op    string // "pread", "pwrite"
	Path  string
	Addr  uintptr // address of the buffer's first byte
	Off   int64
	Len   int
	Align Alignment
}

func (e *UnalignedError) Error() string {
	return fmt.Sprintf("direct: %s %s: unaligned I/O: address %#x, offset %d, length %d; the file needs memory alignment %d and offset/length alignment %d",
		e.Op, e.Path, e.Addr, e.Off, e.Len, e.Align.Memory, e.Align.Offset)
}

// Is makes errors.Is(err, ErrUnaligned) true.
func (e *UnalignedError) Is(target error) bool { return target == ErrUnaligned }
