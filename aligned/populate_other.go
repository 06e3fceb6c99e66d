//go:build unix && !linux

package aligned

const mapPopulate = 0
