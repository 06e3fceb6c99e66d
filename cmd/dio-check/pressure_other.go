//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

// childAttrs has nothing to set: memory cgroups, and so pressure, are
// Linux's.
func childAttrs(*exec.Cmd) {}

func cotenantAttrs(*exec.Cmd) {}

func readCPUTimes() (cpuTimes, error) { return cpuTimes{}, errors.ErrUnsupported }

func availBytes(string) (int64, error) { return 0, errors.ErrUnsupported }
