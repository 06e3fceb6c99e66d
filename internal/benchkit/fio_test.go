package benchkit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fioOutput is fio 3.33's JSON, cut down to what ParseFio reads, after a
// note fio prints first when it lays out the file.
const fioOutput = `note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "cotenant",
      "error" : 0,
      "read" : {
        "bw_bytes" : 2621440000,
        "iops" : 640000.5,
        "total_ios" : 6400005,
        "runtime" : 10000,
        "clat_ns" : {
          "percentile" : {
            "50.000000" : 1208,
            "99.000000" : 2096,
            "99.900000" : 11456
          }
        }
      }
    }
  ]
}`

// TestParseFio: a job's rates and latency percentiles are read past the
// notes fio prints first; output with no job, several, or a failed one
// is refused.
func TestParseFio(t *testing.T) {
	job, err := ParseFio([]byte(fioOutput))
	require.NoError(t, err)
	assert.Equal(t, 640000.5, job.Read.IOPS)
	assert.Equal(t, int64(6400005), job.Read.TotalIOs)
	assert.Equal(t, 2621440000.0, job.Read.BwBytes)
	assert.Equal(t, 1208*time.Nanosecond, job.Read.Percentile(0.50))
	assert.Equal(t, 2096*time.Nanosecond, job.Read.Percentile(0.99))
	assert.Equal(t, 11456*time.Nanosecond, job.Read.Percentile(0.999))
	assert.Zero(t, job.Read.Percentile(0.25), "not reported")
	for _, bad := range []string{"", "{", `{"jobs": []}`, `{"jobs": [{}, {}]}`, `{"jobs": [{"error": 5}]}`} {
		_, err := ParseFio([]byte(bad))
		assert.Error(t, err, bad)
	}
}

// TestRunFio runs a fake fio (a script on PATH printing fioOutput) bare
// and through a cgroup's procs file, which the shell writes its pid to
// before it becomes fio; a fio that fails reports its stderr.
func TestRunFio(t *testing.T) {
	bin := t.TempDir()
	out := filepath.Join(bin, "out.json")
	require.NoError(t, os.WriteFile(out, []byte(fioOutput), 0o644))
	script := "#!/bin/sh\nfor a; do [ \"$a\" = --fail ] && { echo 'bad job' >&2; exit 1; }; done\ncat " + out + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "fio"), []byte(script), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	job, err := RunFio(FioCmd(context.Background(), "", "--name=x"), nil)
	require.NoError(t, err)
	assert.Equal(t, 640000.5, job.Read.IOPS)

	procs := filepath.Join(t.TempDir(), "cgroup.procs")
	require.NoError(t, os.WriteFile(procs, nil, 0o644))
	_, err = RunFio(FioCmd(context.Background(), procs, "--name=x"), nil)
	require.NoError(t, err)
	pid, err := os.ReadFile(procs)
	require.NoError(t, err)
	assert.NotEmpty(t, pid, "the shell joined the cgroup")

	_, err = RunFio(FioCmd(context.Background(), "", "--fail"), nil)
	require.ErrorContains(t, err, "bad job")
}

// TestWriteHot: the hot file holds size bytes, durable, no 1 MiB chunk
// equal to another, and is left open at its start.
func TestWriteHot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hot")
	f, err := WriteHot(path, 3<<20+100)
	require.NoError(t, err)
	defer f.Close()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, data, 3<<20+100)
	assert.NotEqual(t, data[:1<<20], data[1<<20:2<<20])
	_, err = WriteHot(path, 1)
	assert.ErrorIs(t, err, os.ErrExist, "an existing file is never overwritten")
}
