package fallback_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// modeCounts is the count of Stats that a file of mode m adds to.
func modeCount(s fallback.OpenStats, m fallback.Mode) uint64 {
	switch m.Name() {
	case "direct+io_uring":
		return s.URing
	case "direct+pwrite":
		return s.Pwrite
	case "std-fs+dontcache":
		return s.DontCache
	}
	return s.StdFS
}

// TestOpenStats opens files with each policy and checks that Stats
// counts each under its mode, and each fallback under its cause.
func TestOpenStats(t *testing.T) {
	dir := testenv.Dir(t)
	_, derr := direct.Open(filepath.Join(dir, "probe"), os.O_RDWR|os.O_CREATE, 0o644)
	refused := errors.Is(derr, direct.ErrNotSupported)
	kerr := dontCacheErr(t, dir)
	for _, p := range []fallback.Policy{fallback.Auto, fallback.StdFS, fallback.DontCache, fallback.DirectPwrite} {
		t.Run(p.String(), func(t *testing.T) {
			before := fallback.Stats()
			f, err := fallback.Open(filepath.Join(dir, "f"+p.String()), os.O_RDWR|os.O_CREATE, 0o644, p)
			if p == fallback.DirectPwrite && refused {
				require.ErrorIs(t, err, direct.ErrNotSupported)
				assert.Equal(t, fallback.OpenStats{LastReason: before.LastReason}, fallback.Stats().Sub(before), "a failed Open counts nothing")
				return
			}
			require.NoError(t, err)
			defer f.Close()
			m := f.Mode()
			s := fallback.Stats().Sub(before)
			assert.Equal(t, uint64(1), modeCount(s, m), "%v", m)
			assert.Equal(t, uint64(1), s.URing+s.Pwrite+s.StdFS+s.DontCache)

			var want fallback.OpenStats
			switch {
			case p == fallback.Auto && refused:
				want.NoDirect = 1
				want.NoDontCache = b2u(kerr != "")
			case p == fallback.Auto && m.Engine == direct.EnginePwrite:
				if errors.Is(fallback.URingErrorAt(dir), fallback.ErrURingAvoided) {
					want.URingAvoided = 1
				} else {
					want.NoURing = 1
				}
			case p == fallback.DontCache:
				want.NoDontCache = b2u(kerr != "")
			}
			got := s
			got.URing, got.Pwrite, got.StdFS, got.DontCache, got.LastReason = 0, 0, 0, 0, ""
			assert.Equal(t, want, got, "fallbacks of %v", m)
			if m.Reason != "" && p != fallback.DirectPwrite {
				assert.Equal(t, m.String(), s.LastReason)
			}
		})
	}
}

// TestOpenStatsRefused counts Auto's fallback to the page cache where
// O_DIRECT is refused, on any filesystem.
func TestOpenStatsRefused(t *testing.T) {
	dir := testenv.Dir(t)
	t.Cleanup(fallback.RefuseDirect())
	before := fallback.Stats()
	f, err := fallback.Open(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644, fallback.Auto)
	require.NoError(t, err)
	defer f.Close()
	s := fallback.Stats().Sub(before)
	assert.Equal(t, uint64(1), s.NoDirect)
	assert.Equal(t, f.Mode().String(), s.LastReason)
	assert.Contains(t, s.LastReason, "rejected O_DIRECT")
}

// TestWithMeter checks that a Meter on a File from Open counts its I/O,
// and its owner's asks under the Mode's path.
func TestWithMeter(t *testing.T) {
	dir := testenv.Dir(t)
	for _, p := range []fallback.Policy{fallback.Auto, fallback.StdFS} {
		t.Run(p.String(), func(t *testing.T) {
			f, err := fallback.Open(filepath.Join(dir, "f"+p.String()), os.O_RDWR|os.O_CREATE, 0o644, p)
			require.NoError(t, err)
			defer f.Close()
			m, err := direct.NewMeter(nil)
			require.NoError(t, err)
			g := fallback.WithMeter(f, m)
			a := f.Alignment()
			b, err := aligned.New(max(a.Block(), direct.MinAlignment), max(a.Memory, direct.MinAlignment))
			require.NoError(t, err)
			defer b.Free()

			before := direct.Stats()
			m.Asked(direct.OpWrite, 10)
			_, err = g.WriteAt(b.Bytes(), 0)
			require.NoError(t, err)
			require.NoError(t, g.Sync())
			s := direct.Stats().Sub(before)
			assert.Equal(t, uint64(10), s.Paths[f.Mode().Path()].Write.Asked)
			assert.Equal(t, direct.Counts{Ops: 1, Bytes: uint64(len(b.Bytes())), Calls: 1, Asked: 10}, m.Stats().Write)
			assert.Equal(t, uint64(1), m.Stats().Sync.Ops)
			_, err = f.WriteAt(b.Bytes(), 0) // the File without the meter
			require.NoError(t, err)
			assert.Equal(t, uint64(1), m.Stats().Write.Ops)
		})
	}
	assert.Panics(t, func() { fallback.WithMeter(nil, nil) })
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
