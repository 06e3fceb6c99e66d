package reader

import (
	"errors"
	"io"
	"syscall"

	"github.com/dio-storage/dio/direct"
)

// EndOK drops the io.EOF of a read cut short by the end of the file.
func EndOK(n int, err error) (int, error) {
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// UnsplitEIO reports whether err is an EIO that has not been split into
// sectors yet (direct.File.ReadAt does; a queued read does not). It
// returns at once for nil: errors.As's target escapes to the heap, and a
// read that succeeded allocates nothing.
func UnsplitEIO(err error) bool {
	if err == nil {
		return false
	}
	var se *direct.SectorError
	return errors.Is(err, syscall.EIO) && !errors.As(err, &se)
}

// BadSectors reports whether err names sectors that could not be read
// (direct.SectorError), the bytes before them having been read. It
// returns at once for nil, as UnsplitEIO does.
func BadSectors(err error) bool {
	if err == nil {
		return false
	}
	var se *direct.SectorError
	return errors.As(err, &se)
}
