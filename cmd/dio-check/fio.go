//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/dio-storage/dio/internal/ingest"
)

// fioEngine names the reference row: fio writing the same bytes with
// 64 KiB-style requests at queue depth 4 through io_uring and O_DIRECT,
// then fsyncing, as the direct rows do.
const fioEngine = "fio io_uring QD4"

// runFio writes size bytes to a new file in dir with fio in requests of
// bs bytes and returns fio's write throughput in MiB/s, which counts the
// final fsync (--end_fsync).
func runFio(dir string, bs int, size int64, tmp *tempFiles) (float64, error) {
	path, err := createTemp(dir, ".dio-check-fio-", tmp)
	if err != nil {
		return 0, err
	}
	defer tmp.remove(path)
	if err := ingest.Settle(dir); err != nil {
		return 0, err
	}
	cmd := exec.Command("fio", "--name=dio-check", "--filename="+path,
		"--ioengine=io_uring", "--direct=1", "--rw=write", "--iodepth=4", "--end_fsync=1",
		"--bs="+strconv.Itoa(bs), "--size="+strconv.FormatInt(size, 10), "--output-format=json")
	// fio dies with us: an interrupted bench must not leave it writing.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return 0, fmt.Errorf("fio: %v: %s", err, strings.ReplaceAll(strings.TrimSpace(string(ee.Stderr)), "\n", "; "))
		}
		return 0, fmt.Errorf("fio: %w", err)
	}
	var res struct {
		Jobs []struct {
			Error int `json:"error"`
			Write struct {
				BwBytes float64 `json:"bw_bytes"`
			} `json:"write"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("fio: reading its JSON: %w", err)
	}
	if len(res.Jobs) != 1 || res.Jobs[0].Error != 0 || res.Jobs[0].Write.BwBytes <= 0 {
		return 0, fmt.Errorf("fio: no write result in %s", out)
	}
	return res.Jobs[0].Write.BwBytes / (1 << 20), nil
}

// haveFio reports whether fio is on the PATH.
func haveFio() bool {
	_, err := exec.LookPath("fio")
	return err == nil
}
