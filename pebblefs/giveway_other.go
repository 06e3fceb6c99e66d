//go:build unix && !linux

package pebblefs

// watchMemory does nothing where memory cgroups do not exist.
func (c *freshFiles) watchMemory() {}
