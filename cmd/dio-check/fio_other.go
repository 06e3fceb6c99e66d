//go:build !linux

package main

import "errors"

const fioEngine = "fio io_uring QD4"

// fio's io_uring engine is Linux's.
func haveFio() bool { return false }

func runFio(string, int, int64, *tempFiles) (float64, error) {
	return 0, errors.New("fio: io_uring needs Linux")
}
