//go:build !linux

package main

import (
	"errors"
	"os"
	"os/exec"
)

// childAttrs has nothing to set: memory cgroups, and so pressure, are
// Linux's.
func childAttrs(*exec.Cmd) {}

func cotenantAttrs(*exec.Cmd) {}

func readCPUTimes() (cpuTimes, error) { return cpuTimes{}, errors.ErrUnsupported }

func availBytes(string) (int64, error) { return 0, errors.ErrUnsupported }

type residency struct{}

func newResidency(*os.File, int64) (*residency, error) { return nil, errors.ErrUnsupported }
func (*residency) fraction() (float64, error)          { return 0, errors.ErrUnsupported }
func (*residency) close()                              {}

// loopDevice is Linux's.
type loopDevice struct {
	majMin, mnt string
	unthrottle  func() error
}

func makeLoopDevice(string, int64) (*loopDevice, error) { return nil, errors.ErrUnsupported }
func (*loopDevice) remove() error                       { return nil }
func (*loopDevice) String() string                      { return "" }
