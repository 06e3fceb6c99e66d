//go:build !linux

package pebblefs

// memoryLimit returns 0: the fresh files' default is then its floor.
func memoryLimit() int64 { return 0 }
