package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKillTree starts a shell that forks a sleep in a session of its own,
// as fio forks its jobs, and checks that killTree finds and kills both,
// not only the shell.
func TestKillTree(t *testing.T) {
	cmd := exec.Command("sh", "-c", "setsid sleep 30 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var buf [32]byte
	n, err := out.Read(buf[:])
	require.NoError(t, err)
	sleep, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	require.NoError(t, err)
	// setsid forks when it is a group leader; let the sleep start.
	time.Sleep(50 * time.Millisecond)

	kids := killTree(cmd.Process)
	cmd.Wait()
	for _, pid := range kids {
		waitDead(pid)
	}
	assert.NotEmpty(t, kids)
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(sleep) + "/stat")
	assert.True(t, err != nil || strings.Contains(string(stat), ") Z "), "the sleep outlived the shell: %s", stat)
}
