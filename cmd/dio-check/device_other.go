//go:build !linux

package main

// ramDevice is Linux's (sysfs tells what backs a loop device).
func ramDevice(string) string { return "" }
