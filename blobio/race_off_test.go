//go:build !race

package blobio_test

const raceEnabled = false
