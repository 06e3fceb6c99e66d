package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/testenv"
)

// TestProbeCommand: the probe may be named, as the help names it
// (dio-check probe DIR, issue 34: it took "probe" for a directory), and
// then does what it does unnamed; help probe shows its flags.
func TestProbeCommand(t *testing.T) {
	dir := testenv.Dir(t)
	named, stderr, code := dioCheck(t, "probe", "-json", dir)
	require.Equal(t, 0, code, stderr)
	plain, stderr, code := dioCheck(t, "-json", dir)
	require.Equal(t, 0, code, stderr)
	var a, b map[string]any
	require.NoError(t, json.Unmarshal([]byte(named), &a), named)
	require.NoError(t, json.Unmarshal([]byte(plain), &b), plain)
	assert.Equal(t, b["mode"], a["mode"])
	assert.Equal(t, dir, a["dir"])
	testenv.RequireEmpty(t, dir)

	out, _, code := dioCheck(t, "help", "probe")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "usage: dio-check [probe] [-json] [-require direct] DIR...")
	_, stderr, code = dioCheck(t, "prboe", dir)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "did you mean probe?")
}

// TestProbeAlignNote: where nothing tells the alignment (tmpfs: no statx
// DIOALIGN, no block device), dio aligns to the default 4096 while the
// kernel takes writes of 512; the table says why the two differ, and
// says nothing where they agree.
func TestProbeAlignNote(t *testing.T) {
	p := Probe{Dir: "/d", FS: "tmpfs", ODirect: true, MemAlign: 4096, OffsetAlign: 4096, AlignSource: "default", MinWriteAlign: 512, Mode: "direct+io_uring"}
	var out bytes.Buffer
	printProbes(&out, []Probe{p})
	assert.Contains(t, out.String(), "ALIGN: tmpfs says nothing of its direct-I/O alignment")
	assert.Contains(t, out.String(), "MIN WRITE 512 is the smallest write the kernel")

	p.AlignSource, p.OffsetAlign, p.MemAlign = "statx", 512, 512
	out.Reset()
	printProbes(&out, []Probe{p})
	assert.NotContains(t, out.String(), "ALIGN:")
}
