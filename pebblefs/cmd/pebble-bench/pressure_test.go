//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dio-storage/dio/internal/cgroup"
)

// TestMain lets the test binary stand in for pebble-bench: the pressure
// test's ingest children are this binary, run as os.Executable.
func TestMain(m *testing.M) {
	if os.Getenv(ingestEnv) != "" || os.Getenv(childEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParsePressure(t *testing.T) {
	c, err := parsePressure([]string{"/d"})
	if err != nil {
		t.Fatal(err)
	}
	if c.dir != "/d" || c.memory != 1<<30 || c.hot != 600<<20 || c.cache != 64<<20 || c.seconds != 20 ||
		c.lead != 5 || c.rounds != 3 || c.batch != 100 || c.value != 1024 || !slices.Equal(c.engines, []string{"default", "pebblefs"}) {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = parsePressure([]string{"-fs", "pebblefs,default-unlimited", "-memory", "512MiB", "-hot", "256MiB", "-lead", "0", "/d"})
	if err != nil {
		t.Fatal(err)
	}
	if c.memory != 512<<20 || c.hot != 256<<20 || c.lead != 0 || !slices.Equal(c.engines, []string{"pebblefs", unlimitedLimit}) {
		t.Fatalf("parsed %+v", c)
	}
	for _, bad := range [][]string{
		{},                               // no DIR
		{"/d", "/e"},                     // two
		{"-fs", "ext4", "/d"},            // unknown engine
		{"-fs", "default,default", "/d"}, // twice
		{"-hot", "1GiB", "/d"},           // not below -memory
		{"-hot", "1000", "/d"},           // not a multiple of 4 KiB
		{"-hot", "0", "/d"},              // nothing to read
		{"-memory", "lots", "/d"},        // not a size
		{"-seconds", "0", "/d"},          // nothing measured
		{"-rounds", "0", "/d"},           // no round
		{"-lead", "-1", "/d"},            // negative
		{"-batch", "0", "/d"},            // empty batches
		{"-procs", "0", "/d"},            // no CPU
		{"-unknown", "/d"},               // no such flag
	} {
		if _, err := parsePressure(bad); err == nil {
			t.Errorf("parsePressure(%q) accepted", bad)
		}
	}
}

// fioOutput is fio 3.33's JSON, cut down to what parseFio reads, after a
// note fio prints first when it lays out the file.
const fioOutput = `note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "cotenant",
      "read" : {
        "io_bytes" : 2621440000,
        "iops" : 640000.5,
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

func TestParseFio(t *testing.T) {
	r, err := parseFio([]byte(fioOutput))
	if err != nil {
		t.Fatal(err)
	}
	if r.iops != 640000.5 || r.p50 != 1.208 || r.p99 != 2.096 || r.p999 != 11.456 {
		t.Fatalf("parsed %+v", r)
	}
	for _, bad := range []string{"", "{", `{"jobs": []}`} {
		if _, err := parseFio([]byte(bad)); err == nil {
			t.Errorf("parseFio(%q) accepted", bad)
		}
	}
}

// TestPressureCleanup runs the pressure subcommand small (an 8 MiB hot
// file, 1 s phases), to the end and interrupted as Pebble ingests, and
// checks that neither leaves a cgroup, a file or a process behind. Needs
// root, a memory cgroup and fio.
func TestPressureCleanup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, for the memory cgroup")
	}
	if _, err := exec.LookPath("fio"); err != nil {
		t.Skip("needs fio")
	}
	roots, err := cgroup.Discover()
	if err != nil {
		t.Skip(err)
	}
	parent, err := cgroup.Parent(cgroup.OS{}, roots)
	if err != nil {
		t.Skip(err)
	}
	prefix := filepath.Join(parent, "pebble-bench-pressure-"+strconv.Itoa(os.Getpid())+"-")
	for _, interrupt := range []bool{false, true} {
		t.Run(map[bool]string{false: "complete", true: "interrupted"}[interrupt], func(t *testing.T) {
			dir := t.TempDir()
			c, err := parsePressure([]string{"-fs", "default,pebblefs", "-memory", "256MiB", "-hot", "8MiB", "-cache", "8MiB",
				"-seconds", "1", "-lead", "1", "-rounds", "1", "-json", dir})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stdout bytes.Buffer
			stderr := io.Writer(io.Discard)
			if interrupt {
				// Cancel while Pebble ingests, before the co-tenant
				// is measured beside it.
				stderr = &onLine{match: "on default ingesting", do: cancel}
			}
			err = runPressure(ctx, c, &stdout, stderr)
			if interrupt {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("interrupted run: %v, want context.Canceled", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
				if len(lines) != 3 || !strings.Contains(lines[0], `"engine":"alone"`) ||
					!strings.Contains(lines[1], `"engine":"default"`) || !strings.Contains(lines[2], `"engine":"pebblefs"`) {
					t.Fatalf("rows:\n%s", stdout.String())
				}
				if strings.Contains(lines[2], `"cotenant_reads_s":0,`) || strings.Contains(lines[2], `"ingest_mib_s":0,`) {
					t.Fatalf("a row measured nothing: %s", lines[2])
				}
			}
			if kids := children(t); len(kids) > 0 {
				t.Errorf("processes left: %v", kids)
			}
			if left, _ := filepath.Glob(prefix + "*"); len(left) > 0 {
				t.Errorf("cgroups left: %q", left)
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Errorf("%d files left in DIR, the first %s", len(ents), ents[0].Name())
			}
		})
	}
}

// onLine is a writer that calls do, once, when a line it is given
// contains match.
type onLine struct {
	match string
	do    func()
	once  sync.Once
}

func (w *onLine) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(w.match)) {
		w.once.Do(w.do)
	}
	return len(p), nil
}

// children returns the pids of this process's children, from every
// thread's /proc children list (a child belongs to the thread that
// started it).
func children(t *testing.T) []string {
	tasks, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil || len(tasks) == 0 {
		t.Skip("no /proc/self/task/*/children")
	}
	var kids []string
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}
