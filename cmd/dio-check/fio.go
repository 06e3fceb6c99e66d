//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dio-storage/dio/internal/benchkit"
)

// fioEngine names the reference row: fio writing as many bytes with
// requests of the buffer size at queue depth 4 through io_uring and
// O_DIRECT, then fsyncing, as the direct rows do. dio merges neighbouring
// buffers into larger requests; fio's requests are the buffer size, which
// is the comparison the reference is for.
const fioEngine = "fio io_uring QD4"

// runFio writes size bytes to a new file in dir with fio in requests of
// bs bytes and returns fio's write throughput in MiB/s, which counts the
// final fsync (--end_fsync), and the CPU time fio's process used.
func runFio(dir string, bs int, size int64, tmp *tempFiles) (float64, time.Duration, error) {
	// fio writes into a directory of ours: were it removed by a signal
	// before fio opens its file, fio fails instead of creating one.
	work, err := tmp.mkdirTemp(dir, ".dio-check-fio-")
	if err != nil {
		return 0, 0, err
	}
	defer tmp.remove(work)
	if err := benchkit.Settle(dir); err != nil {
		return 0, 0, err
	}
	job, err := fio(tmp, "--name=dio-check", "--directory="+work, "--filename=data",
		"--ioengine=io_uring", "--direct=1", "--rw=write", "--iodepth=4", "--end_fsync=1",
		"--bs="+strconv.Itoa(bs), "--size="+strconv.FormatInt(size, 10))
	if err != nil {
		return 0, 0, err
	}
	if job.Write.BwBytes <= 0 {
		return 0, 0, errors.New("fio: no write result")
	}
	return job.Write.BwBytes / (1 << 20), job.CPU, nil
}

// fioReadEngine names the read reference rows: fio randread, 4 KiB
// requests through io_uring and O_DIRECT at a queue depth of readers.
const fioReadEngine = "fio io_uring"

// fioJobsEngine names the read reference rows of fio in the shape of
// goroutines that each have one read in flight: as many jobs as readers
// (processes, counted together), each at QD1, in 4 KiB requests. Some
// devices serve one submitter keeping 16 reads in flight much faster than
// 16 submitters with one each (a virtio disk here: about 1.8x), whoever
// submits; these rows tell the engine from the shape.
const fioJobsEngine = "fio io_uring jobs"

// fioReadBlock is the reference rows' request size: fio's bs=4k, the
// page a 4,000-byte blob and its header about fill.
const fioReadBlock = 4096

// runFioRead reads the file at path, which holds size bytes, at random
// at queue depth qd for d, in requests that sizing describes (--bs, or
// fioSpans' arguments), and returns what fio measured. fio only reads:
// the file is ours (in a directory the caller tracks), and fio is killed
// on a signal as the write reference is.
func runFioRead(path string, size int64, qd int, d time.Duration, tmp *tempFiles, sizing ...string) (fioRead, error) {
	if size < fioReadBlock {
		return fioRead{}, fmt.Errorf("fio: %s is shorter than one %d-byte read", path, fioReadBlock)
	}
	// fio would extend a file shorter than its size; it reads whole blocks.
	size -= size % fioReadBlock
	// fio splits --filename at colons unless they are escaped.
	name := strings.ReplaceAll(path, ":", `\:`)
	args := []string{"--name=dio-check-read", "--filename=" + name, "--readonly",
		"--ioengine=io_uring", "--direct=1", "--rw=randread", "--norandommap", "--randrepeat=0",
		"--iodepth=" + strconv.Itoa(qd), "--size=" + strconv.FormatInt(size, 10),
		"--time_based", "--runtime=" + strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"}
	if len(sizing) == 0 {
		sizing = []string{"--bs=" + strconv.Itoa(fioReadBlock)}
	}
	job, err := fio(tmp, append(args, sizing...)...)
	if err != nil {
		return fioRead{}, err
	}
	if job.Read.IOPS <= 0 || job.Read.TotalIOs <= 0 {
		return fioRead{}, errors.New("fio: no read result")
	}
	return fioRead{job.Read, job.CPU}, nil
}

// fioRead is fio's account of a job's reads, and the CPU fio used.
type fioRead struct {
	benchkit.FioIO
	CPU time.Duration
}

// fio runs one fio job with args and returns its result. fio runs as a
// process tmp tracks, so that a signal kills it before the files are
// removed, and dies with us, whatever kills us.
func fio(tmp *tempFiles, args ...string) (benchkit.FioJob, error) {
	cmd := benchkit.FioCmd(context.Background(), "", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return benchkit.RunFio(cmd, tmp.run)
}

// haveFio reports whether fio is on the PATH.
func haveFio() bool {
	_, err := exec.LookPath("fio")
	return err == nil
}
