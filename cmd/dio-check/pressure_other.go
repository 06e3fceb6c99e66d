//go:build !linux

package main

import "os/exec"

// childAttrs has nothing to set: memory cgroups, and so pressure, are
// Linux's.
func childAttrs(*exec.Cmd) {}
