//go:build !linux

package benchkit

import (
	"errors"
	"os"
)

// Resident is measured on Linux only; elsewhere it reports -1 bytes.
func Resident(_ uintptr, size int64) (int64, int64, error) { return -1, size, nil }

// ResidentPath is measured on Linux only; elsewhere it reports -1 bytes.
func ResidentPath(path string) (int64, int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	return -1, st.Size(), nil
}

// Residency is Linux's.
type Residency struct{}

func NewResidency(*os.File, int64) (*Residency, error) { return nil, errors.ErrUnsupported }
func (*Residency) Fraction() (float64, error)          { return 0, errors.ErrUnsupported }
func (*Residency) Close()                              {}

// Settle is a no-op where syncfs is not available.
func Settle(string) error { return nil }

// DropCache does nothing where posix_fadvise is not available: reads of a
// cached file there measure memory.
func DropCache(string) error { return nil }
