package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/internal/testenv"
)

// onTerminal runs cmd with its stderr, and its stdout unless cmd has
// one, on a pseudo-terminal of cols columns, as a user's shell does, and
// returns what the terminal showed with its "\r\n" turned back into "\n".
func onTerminal(t *testing.T, cmd *exec.Cmd, cols uint16) string {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer master.Close()
	require.NoError(t, unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	defer slave.Close()
	require.NoError(t, unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: cols}))
	if cmd.Stdout == nil {
		cmd.Stdout = slave
	}
	cmd.Stderr = slave
	require.NoError(t, cmd.Start())
	slave.Close() // the child holds it; the master reads EOF (EIO) when it exits
	var out bytes.Buffer
	_, _ = io.Copy(&out, master) // ends with EIO once the child is gone
	require.NoError(t, cmd.Wait(), out.String())
	return strings.ReplaceAll(out.String(), "\r\n", "\n")
}

// TestBenchProgressTerminal runs the bench with stdout and stderr on one
// 80-column terminal, as a user does: the progress is a bar redrawn in
// place with the count and the time left, never wider than the terminal,
// and -json's objects each start a line of their own rather than run on
// from the bar.
func TestBenchProgressTerminal(t *testing.T) {
	dir := testenv.Dir(t)
	cmd := exec.Command(binary, "bench", "-json", "-workload", "seq-no-delta,seq", "-size", "1MiB", "-buffers", "64KiB", "-fio=false", dir)
	// The bar redraws with "\r\033[K".
	text := onTerminal(t, cmd, 80)
	assert.Contains(t, text, "\r\033[Kdio-check bench: [", "a live bar on a terminal")
	bar := regexp.MustCompile(`^dio-check bench: \[[=> ]+\] (\d+)/(\d+) .*, about \d+s left$`)
	objects, bars := 0, 0
	for _, line := range strings.Split(text, "\n") {
		for _, part := range strings.Split(line, "\r\033[K") {
			switch {
			case part == "", strings.HasPrefix(part, "dio-check: skipped "):
			case strings.HasPrefix(part, "dio-check bench: ["):
				assert.LessOrEqual(t, len([]rune(part)), 79, "wider than the terminal: %q", part)
				if strings.Contains(part, "left") {
					assert.Regexp(t, bar, part)
					bars++
				}
			default:
				var r BenchResult
				assert.NoError(t, json.Unmarshal([]byte(part), &r), "not a line of its own: %q", part)
				objects++
			}
		}
	}
	assert.Positive(t, bars, "the count and the time left: %q", text)
	assert.GreaterOrEqual(t, objects, 4, "the std-fs rows at least: %q", text)
	testenv.RequireEmpty(t, dir)
}
