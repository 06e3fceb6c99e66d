//go:build !unix

package blobio_test

import "time"

// processCPU is unknown here.
func processCPU() time.Duration { return 0 }
