package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/testenv"
)

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{
		{"bench", "bench", 0}, {"bnech", "bench", 1}, {"bech", "bench", 1}, {"benchh", "bench", 1},
		{"presure", "pressure", 1}, {"presssure", "pressure", 1}, {"perssure", "pressure", 1},
		{"hlep", "help", 1}, {"tmp", "help", 3}, {"", "help", 4}, {"ca", "abc", 3},
	} {
		assert.Equal(t, c.d, editDistance(c.a, c.b), "%q %q", c.a, c.b)
	}
}

// TestMisspelt: a first argument one typo from a command, and naming
// nothing, is that command misspelt; a directory of that name, a path,
// a flag, or a word further off is not.
func TestMisspelt(t *testing.T) {
	for arg, want := range map[string]string{"bnech": "bench", "Bench": "bench", "benhc": "bench", "pressur": "pressure", "prsesure": "pressure", "hepl": "help"} {
		got, ok := misspelt(arg)
		assert.True(t, ok, arg)
		assert.Equal(t, want, got, arg)
	}
	for _, arg := range []string{"bench", "-bnech", "./bnech", "/tmp", "tmp", "temp", "bnehc2", "dir", ""} {
		_, ok := misspelt(arg)
		assert.False(t, ok, arg)
	}
	// A directory named like a typo is probed, as asked.
	dir := testenv.Dir(t)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.NoError(t, os.Chdir(dir))
	t.Cleanup(func() { os.Chdir(wd) })
	require.NoError(t, os.Mkdir("bnech", 0o755))
	_, ok := misspelt("bnech")
	assert.False(t, ok, "an existing directory")
	require.NoError(t, os.Remove("bnech"))
}

// TestTypoCommand: dio-check bnech DIR says what it meant and exits 2,
// probing nothing (issue 24: it probed DIR, then failed on "bnech").
func TestTypoCommand(t *testing.T) {
	dir := testenv.Dir(t)
	stdout, stderr, code := dioCheck(t, "bnech", dir)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout, "nothing probed")
	assert.Equal(t, "dio-check: unknown command bnech; did you mean bench?\nRun 'dio-check help' for the commands and their flags.\n", stderr)
	testenv.RequireEmpty(t, dir)
}

// TestNegativeSize: a negative size says so, not "not a size".
func TestNegativeSize(t *testing.T) {
	_, err := parseSize("-5MiB")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "negative")
	_, stderr, code := dioCheck(t, "bench", "-size", "-5MiB", testenv.Dir(t))
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `invalid value "-5MiB" for flag -size: negative`)
	assert.NotContains(t, stderr, "not a size")
}

// TestBenchHelpDefaults: bench -h gives -depth its real default and -size
// a single one.
func TestBenchHelpDefaults(t *testing.T) {
	var b strings.Builder
	fs, _ := benchFlags()
	printFlags(&b, fs)
	help := b.String()
	flagHelp := func(name string) string {
		i := strings.Index(help, "  -"+name+" ")
		require.GreaterOrEqual(t, i, 0, name)
		rest := help[i+1:]
		if j := strings.Index(rest, "\n  -"); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	size := flagHelp("size")
	assert.Equal(t, 1, strings.Count(size, "default"), size)
	assert.Contains(t, size, "(default 128MiB)")
	depth := flagHelp("depth")
	assert.NotContains(t, depth, "0: the default)", "the default named")
	assert.Contains(t, depth, "16 of 64KiB")
}

// TestVersion: -version prints the module version ("(devel)" when built
// in the repository) and the toolchain, and exits 0.
func TestVersion(t *testing.T) {
	v := version()
	assert.True(t, strings.HasPrefix(v, "dio-check "), v)
	assert.Contains(t, v, runtime.Version())
	for _, arg := range []string{"-version", "--version"} {
		stdout, stderr, code := dioCheck(t, arg)
		assert.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "(devel)")
		assert.Contains(t, stdout, runtime.Version())
	}
	_, _, code := dioCheck(t, "-version", filepath.Join(testenv.Dir(t), "x"))
	assert.Equal(t, 2, code, "-version with a directory is no probe flag")
}
