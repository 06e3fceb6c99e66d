package fallback_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/filetest"
	"github.com/dio-storage/dio/internal/testenv"
)

func TestConformance(t *testing.T) {
	for _, p := range []fallback.Policy{fallback.Auto, fallback.StdFS, fallback.DontCache} {
		t.Run(p.String(), func(t *testing.T) {
			filetest.Run(t, testenv.Dir(t), func(t *testing.T, path string, flag int) filetest.File {
				f, err := fallback.Open(path, flag, 0o644, p)
				require.NoError(t, err)
				return f
			})
		})
	}
}

func TestAutoMode(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f")
	f, err := fallback.Open(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, fallback.Auto)
	require.NoError(t, err)
	defer f.Close()
	m := f.Mode()
	t.Logf("%s: %v, alignment %v", testenv.FS(), m, f.Alignment())

	_, derr := direct.Open(filepath.Join(dir, "probe"), os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(derr, direct.ErrNotSupported) {
		// The filesystem refuses O_DIRECT: Auto must say so and why.
		assert.False(t, m.Direct)
		fsName, _ := direct.Filesystem(dir)
		want := fsName + " rejected O_DIRECT: invalid argument"
		if dontCacheErr(t, dir) == "" {
			// Uncached buffered writes (TestAutoDontCacheWhereDirectRefused).
			assert.Equal(t, "std-fs+dontcache", m.Name())
			assert.Equal(t, "std-fs+dontcache: "+want, m.String())
		} else {
			assert.Equal(t, "std-fs", m.Name())
			assert.Equal(t, "std-fs: "+want+"; RWF_DONTCACHE: "+dontCacheErr(t, dir), m.String())
		}
		assert.Equal(t, direct.Alignment{Memory: 1, Offset: 1}, f.Alignment())
	} else {
		require.NoError(t, derr)
		assert.True(t, m.Direct)
		assert.True(t, strings.HasPrefix(m.String(), "direct+"), m.String())
		if uerr := fallback.URingErrorAt(path); uerr != nil {
			assert.Equal(t, "direct+pwrite: "+uerr.Error(), m.String())
		} else {
			assert.Equal(t, "direct+io_uring", m.String())
		}
	}
	if testenv.RejectsDirect() {
		// Measured: ramfs refuses RWF_DONTCACHE as well as O_DIRECT.
		assert.Equal(t, "std-fs: ramfs rejected O_DIRECT: invalid argument; RWF_DONTCACHE: operation not supported", m.String())
	}
	if testenv.FS() == "btrfs" && direct.URingError() == nil {
		assert.Equal(t, direct.EnginePwrite, m.Engine, "btrfs avoids io_uring")
		assert.Contains(t, m.Reason, "btrfs")
	}
}

func TestDirectPolicyNeverDegrades(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f")
	f, err := fallback.Open(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, fallback.Direct)
	if testenv.RejectsDirect() {
		require.ErrorIs(t, err, direct.ErrNotSupported)
		_, serr := os.Lstat(path)
		assert.ErrorIs(t, serr, fs.ErrNotExist, "a refused open left its file behind")
		return
	}
	if errors.Is(err, direct.ErrNotSupported) {
		t.Skipf("O_DIRECT refused here: %v", err)
	}
	require.NoError(t, err)
	defer f.Close()
	assert.True(t, f.Mode().Direct)
}

func TestDirectPwritePolicy(t *testing.T) {
	f, err := fallback.Open(filepath.Join(testenv.Dir(t), "f"), os.O_RDWR|os.O_CREATE, 0o644, fallback.DirectPwrite)
	if testenv.RejectsDirect() {
		require.ErrorIs(t, err, direct.ErrNotSupported)
		return
	}
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, "direct+pwrite: chosen by policy", f.Mode().String())
	q, err := f.NewQueue(nil)
	require.NoError(t, err)
	defer q.Close()
	assert.Equal(t, direct.EnginePwrite, q.Engine())
}

func TestStdFSPolicy(t *testing.T) {
	f, err := fallback.Open(filepath.Join(testenv.Dir(t), "f"), os.O_RDWR|os.O_CREATE, 0o644, fallback.StdFS)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, "std-fs", f.Mode().String())
	assert.Equal(t, direct.Alignment{Memory: 1, Offset: 1}, f.Alignment())
	q, err := f.NewQueue(nil)
	require.NoError(t, err)
	defer q.Close()
	assert.Equal(t, direct.EnginePwrite, q.Engine())

	// Any offset and length through the queue too.
	done := make(chan direct.Completion, 1)
	require.NoError(t, q.Submit(direct.Request{Op: direct.OpWrite, Buf: []byte("hello"), Off: 3, Done: done}))
	c := q.Await(done)
	require.NoError(t, c.Err)
	assert.Equal(t, 5, c.N)
}

func TestOpenErrors(t *testing.T) {
	dir := testenv.Dir(t)
	for _, p := range []fallback.Policy{fallback.Auto, fallback.Direct, fallback.StdFS, fallback.DontCache} {
		_, err := fallback.Open(filepath.Join(dir, "missing"), os.O_RDONLY, 0, p)
		assert.ErrorIs(t, err, fs.ErrNotExist, "policy %v", p)
	}
	_, err := fallback.Open(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644, fallback.Policy(42))
	assert.ErrorContains(t, err, "unknown policy")
	_, err = os.Lstat(filepath.Join(dir, "f"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "an unknown policy created a file")
}

func TestModeString(t *testing.T) {
	cases := []struct {
		m    fallback.Mode
		want string
	}{
		{fallback.Mode{Direct: true, Engine: direct.EngineURing}, "direct+io_uring"},
		{fallback.Mode{Direct: true, Engine: direct.EnginePwrite, Reason: "io_uring_setup: operation not permitted"}, "direct+pwrite: io_uring_setup: operation not permitted"},
		{fallback.Mode{Engine: direct.EnginePwrite, Reason: "ramfs rejected O_DIRECT: invalid argument"}, "std-fs: ramfs rejected O_DIRECT: invalid argument"},
		{fallback.Mode{Engine: direct.EnginePwrite}, "std-fs"},
		{fallback.Mode{DontCache: true, Engine: direct.EnginePwrite}, "std-fs+dontcache"},
		{fallback.Mode{DontCache: true, Engine: direct.EnginePwrite, Reason: "ramfs rejected O_DIRECT: invalid argument"}, "std-fs+dontcache: ramfs rejected O_DIRECT: invalid argument"},
		{fallback.Mode{Engine: direct.EnginePwrite, Reason: "RWF_DONTCACHE: operation not supported"}, "std-fs: RWF_DONTCACHE: operation not supported"},
		// Direct wins over a stray DontCache: O_DIRECT bypasses the cache anyway.
		{fallback.Mode{Direct: true, DontCache: true, Engine: direct.EnginePwrite}, "direct+pwrite"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, c.m.String())
	}
}

// TestWithFaults: the File WithFaults returns keeps the Mode, engine and
// write flags of the one it wraps, and injects into its WriteAt, Sync and
// queues; the wrapped File does not.
func TestWithFaults(t *testing.T) {
	for _, p := range []fallback.Policy{fallback.Auto, fallback.StdFS, fallback.DontCache} {
		t.Run(p.String(), func(t *testing.T) {
			f, err := fallback.Open(filepath.Join(testenv.Dir(t), "f"), os.O_RDWR|os.O_CREATE, 0o644, p)
			require.NoError(t, err)
			defer f.Close()
			plan := faults.NewPlan(faults.Fail(direct.OpWrite, 0, syscall.EIO), faults.Fail(direct.OpSync, 0, syscall.ENOSPC))
			g := fallback.WithFaults(f, plan)
			assert.Equal(t, f.Mode(), g.Mode())
			assert.Equal(t, f.Alignment(), g.Alignment())

			b, err := aligned.New(aligned.Up(4096, f.Alignment().Block()), f.Alignment().Memory)
			require.NoError(t, err)
			defer b.Free()
			_, err = g.WriteAt(b.Bytes(), 0)
			assert.ErrorIs(t, err, syscall.EIO)
			assert.ErrorIs(t, g.Sync(), syscall.ENOSPC)
			q, err := g.NewQueue(nil)
			require.NoError(t, err)
			defer q.Close()
			assert.Equal(t, f.Mode().Engine, q.Engine())
			done := make(chan direct.Completion, 1)
			require.NoError(t, q.Submit(direct.Request{Op: direct.OpWrite, Buf: b.Bytes(), Done: done}))
			assert.ErrorIs(t, q.Await(done).Err, syscall.EIO)
			assert.Equal(t, map[string]int{"EIO": 2, "ENOSPC": 1}, plan.Injected())

			_, err = f.WriteAt(b.Bytes(), 0)
			require.NoError(t, err, "the wrapped File consulted the plan")
			require.NoError(t, f.Sync())
		})
	}
	assert.Panics(t, func() { fallback.WithFaults(otherFile{}, faults.NewPlan()) }, "a File not from Open cannot inject")
}

// otherFile is a fallback.File that Open did not make.
type otherFile struct{ fallback.File }
