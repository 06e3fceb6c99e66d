//go:build !linux

package direct

import (
	"errors"
	"fmt"
	"os"
)

// AtomicWrite returns zero: untorn writes are Linux's RWF_ATOMIC.
func (f *File) AtomicWrite() AtomicLimits { return AtomicLimits{} }

// WriteAtomicAt fails with an error matching errors.ErrUnsupported: untorn
// writes are Linux's RWF_ATOMIC.
func (f *File) WriteAtomicAt(p []byte, off int64) (int, error) {
	return 0, &os.PathError{Op: "pwritev2", Path: f.Name(), Err: fmt.Errorf("direct: no untorn writes here: %w", errors.ErrUnsupported)}
}
