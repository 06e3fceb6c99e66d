package ephemeral

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/dio-storage/dio/blobio"
)

var (
	// ErrClosed reports use of a closed File. It matches fs.ErrClosed too,
	// as os.File's errors do.
	ErrClosed = fmt.Errorf("ephemeral: %w", fs.ErrClosed)
	// ErrInvalidOptions reports Options that Create refuses, before any
	// file is created.
	ErrInvalidOptions = errors.New("ephemeral: invalid options")
)

// blobError names the blob at off in err, which DecodeHeader returned: a
// corruption becomes a *blobio.CorruptError at off in the file.
func blobError(off int64, err error) error {
	var ce *blobio.CorruptError
	if errors.As(err, &ce) {
		return corrupt{ce.At(off)} // DecodeHeader's offsets are its input's: make them the file's
	}
	return fmt.Errorf("ephemeral: blob at %d: %w", off, err)
}

// corrupt is a *blobio.CorruptError in ephemeral's words: errors.As and
// errors.Is see the CorruptError (and ErrCorrupt) through it, and its
// message names the package the caller called.
type corrupt struct{ ce *blobio.CorruptError }

func (e corrupt) Error() string {
	return "ephemeral: " + strings.TrimPrefix(e.ce.Error(), "blobio: ")
}

func (e corrupt) Unwrap() error { return e.ce }

// ErrOffset reports an offset no read can start at: a negative one, or
// for ReadBlob one at or past Size.
var ErrOffset = errors.New("ephemeral: offset outside the file")

// offsetError is an offset no read can start at. It matches ErrOffset,
// and blobio.ErrOffset too: ReadBlob's offsets are blob offsets, as
// blobio's Reader takes them.
type offsetError struct{ what string }

func (e offsetError) Error() string        { return ErrOffset.Error() + ": " + e.what }
func (e offsetError) Is(target error) bool { return target == ErrOffset || target == blobio.ErrOffset }
