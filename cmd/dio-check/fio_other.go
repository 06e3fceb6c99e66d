//go:build !linux

package main

import (
	"errors"
	"time"
)

const (
	fioEngine     = "fio io_uring QD4"
	fioReadEngine = "fio io_uring"
	fioJobsEngine = "fio io_uring jobs"
	fioReadBlock  = 4096
)

// fio's io_uring engine is Linux's.
func haveFio() bool { return false }

var errNoFio = errors.New("fio: io_uring needs Linux")

func runFio(string, int, int64, *tempFiles) (float64, time.Duration, error) { return 0, 0, errNoFio }

type fioRead struct {
	BwBytes, IOPS, RuntimeMs float64
	TotalIOs                 int64
	CPU                      time.Duration
}

func runFioRead(string, int64, int, time.Duration, *tempFiles, ...string) (fioRead, error) {
	return fioRead{}, errNoFio
}
