//go:build !linux

package benchkit

import "errors"

// A LoopDevice is Linux's.
type LoopDevice struct {
	MajMin, Mnt string
	Unthrottle  func() error
}

// MakeLoopDevice is Linux's.
func MakeLoopDevice(string, int64) (*LoopDevice, error) { return nil, errors.ErrUnsupported }

func (*LoopDevice) Remove() error  { return nil }
func (*LoopDevice) String() string { return "" }
