//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/dio-storage/dio/internal/ingest"
)

// fioEngine names the reference row: fio writing as many bytes with
// requests of the buffer size at queue depth 4 through io_uring and
// O_DIRECT, then fsyncing, as the direct rows do. dio merges neighbouring
// buffers into larger requests; fio's requests are the buffer size, which
// is the comparison the reference is for.
const fioEngine = "fio io_uring QD4"

// runFio writes size bytes to a new file in dir with fio in requests of
// bs bytes and returns fio's write throughput in MiB/s, which counts the
// final fsync (--end_fsync).
func runFio(dir string, bs int, size int64, tmp *tempFiles) (float64, error) {
	// fio writes into a directory of ours: were it removed by a signal
	// before fio opens its file, fio fails instead of creating one.
	work := tempName(dir, ".dio-check-fio-")
	if err := tmp.makeNew(work, func() error { return os.Mkdir(work, 0o700) }); err != nil {
		return 0, err
	}
	defer tmp.remove(work)
	if err := ingest.Settle(dir); err != nil {
		return 0, err
	}
	cmd := exec.Command("fio", "--name=dio-check", "--directory="+work, "--filename=data",
		"--ioengine=io_uring", "--direct=1", "--rw=write", "--iodepth=4", "--end_fsync=1",
		"--bs="+strconv.Itoa(bs), "--size="+strconv.FormatInt(size, 10), "--output-format=json")
	// fio dies with us, whatever kills us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := tmp.start(cmd)
	if err == nil {
		err = tmp.wait(cmd)
	}
	if err != nil {
		return 0, fmt.Errorf("fio: %v: %s", err, strings.ReplaceAll(strings.TrimSpace(stderr.String()), "\n", "; "))
	}
	out := stdout.Bytes()
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
