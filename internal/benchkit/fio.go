package benchkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// A FioJob is fio's account of one job (its JSON output's jobs[0]), and
// the CPU time fio's process used, all of it (ChildCPU): its start and a
// file's layout too, which a run of a second or more dwarfs.
type FioJob struct {
	Error int   `json:"error"`
	Read  FioIO `json:"read"`
	Write FioIO `json:"write"`

	CPU time.Duration `json:"-"`
}

// FioIO is fio's account of a job's reads or writes.
type FioIO struct {
	BwBytes   float64 `json:"bw_bytes"`
	IOPS      float64 `json:"iops"`
	TotalIOs  int64   `json:"total_ios"`
	RuntimeMs float64 `json:"runtime"`
	Clat      struct {
		Percentile map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

// Percentile returns the completion latency at or below which the share
// p (0.99) of the I/Os completed, from fio's default percentiles (1 to
// 99.99); 0 for one fio did not report.
func (io FioIO) Percentile(p float64) time.Duration {
	return time.Duration(io.Clat.Percentile[fmt.Sprintf("%.6f", 100*p)])
}

// FioCmd returns the command that runs fio with args and its output in
// JSON. procs, when not empty, is a cgroup's cgroup.procs: a shell
// joins the cgroup, then becomes fio, so that everything fio does,
// every page it faults in, is charged to the cgroup.
func FioCmd(ctx context.Context, procs string, args ...string) *exec.Cmd {
	args = append(args, "--output-format=json")
	if procs == "" {
		return exec.CommandContext(ctx, "fio", args...)
	}
	return exec.CommandContext(ctx, "sh", append([]string{"-c", `echo $$ > "$0" && exec fio "$@"`, procs}, args...)...)
}

// RunFio runs cmd, from FioCmd, with run (nil: cmd.Run; a caller's that
// tracks the process, to kill it on a signal) and returns fio's job. An
// error carries what fio said on stderr, on one line.
func RunFio(cmd *exec.Cmd, run func(*exec.Cmd) error) (FioJob, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if run == nil {
		run = (*exec.Cmd).Run
	}
	if err := run(cmd); err != nil {
		return FioJob{}, fmt.Errorf("fio: %v: %s", err, strings.ReplaceAll(strings.TrimSpace(stderr.String()), "\n", "; "))
	}
	job, err := ParseFio(stdout.Bytes())
	if err == nil {
		job.CPU = ChildCPU(cmd.ProcessState)
	}
	return job, err
}

// ParseFio reads fio's JSON output (after any notes fio printed before
// it) and returns its one job, which must have succeeded.
func ParseFio(out []byte) (FioJob, error) {
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	var res struct {
		Jobs []FioJob `json:"jobs"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return FioJob{}, fmt.Errorf("fio: reading its JSON: %w", err)
	}
	switch {
	case len(res.Jobs) == 0:
		return FioJob{}, errors.New("fio reported no job")
	case len(res.Jobs) > 1 || res.Jobs[0].Error != 0:
		return FioJob{}, fmt.Errorf("fio: no result in %s", out)
	}
	return res.Jobs[0], nil
}
