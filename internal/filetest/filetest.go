// Package filetest is test support: the conformance suite for dio's file
// contract, run against direct files and std-fs files alike so that both
// paths are held to the same behaviour (Run), and the fault tests of the
// writers built on that contract, one table and one set of assertions for
// blobio's and ephemeral's (FaultTest), and a queue that counts how a
// caller hands its requests over, in batches or one at a time
// (CountQueue).
//
// It is not one of dio's layers: only test files import it, as
// layers_test.go at the module's root checks.
package filetest

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// File is the contract under test: what blobio and ephemeral rely on.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Sync() error
	Truncate(size int64) error
	Alignment() direct.Alignment
}

// Opener creates or opens the file at path for reading and writing.
type Opener func(t *testing.T, path string, flag int) File

// Run runs the suite. dir is where its files go.
func Run(t *testing.T, dir string, open Opener) {
	s := &suite{dir: dir, open: open}
	t.Run("RoundTrip", s.roundTrip)
	t.Run("EOF", s.eof)
	t.Run("Truncate", s.truncate)
	t.Run("Sync", s.sync)
	t.Run("ConcurrentReadAt", s.concurrentReadAt)
	t.Run("Alignment", s.alignment)
	t.Run("NegativeOffset", s.negativeOffset)
	t.Run("Closed", s.closed)
}

type suite struct {
	dir  string
	open Opener
}

func (s *suite) create(t *testing.T) (File, string) {
	path := filepath.Join(s.dir, filepath.Base(t.Name())+".dat")
	f := s.open(t, path, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
	t.Cleanup(func() { f.Close() })
	return f, path
}

// block is the transfer unit the suite uses: the file's alignment, or
// direct.MinAlignment for page-cache files so the sizes stay meaningful.
func block(f File) int { return max(f.Alignment().Block(), direct.MinAlignment) }

// buffer returns an aligned buffer of n bytes filled from seed.
func buffer(t *testing.T, f File, n int, seed uint64) []byte {
	t.Helper()
	b, err := aligned.New(aligned.Up(n, block(f)), max(f.Alignment().Memory, direct.MinAlignment))
	require.NoError(t, err)
	t.Cleanup(b.Free)
	p := b.Bytes()[:n]
	fill(p, seed)
	return p
}

func fill(p []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range p {
		p[i] = byte(r.Uint32())
	}
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Size()
}

func (s *suite) roundTrip(t *testing.T) {
	f, path := s.create(t)
	blk := block(f)
	// Out of order, with a hole, and one large write.
	writes := []struct{ off, n int }{{2 * blk, blk}, {0, blk}, {5 * blk, 3 * blk}, {blk, blk}, {8 * blk, 64 * blk}}
	want := make([]byte, 72*blk)
	for i, w := range writes {
		p := buffer(t, f, w.n, uint64(i))
		n, err := f.WriteAt(p, int64(w.off))
		require.NoError(t, err)
		require.Equal(t, w.n, n)
		copy(want[w.off:], p)
	}
	assert.Equal(t, int64(len(want)), size(t, path))
	got := buffer(t, f, len(want), 99)
	n, err := f.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, len(want), n)
	require.True(t, bytes.Equal(want, got), "read back differs from what was written")
}

func (s *suite) eof(t *testing.T) {
	f, _ := s.create(t)
	blk := block(f)
	data := buffer(t, f, 3*blk, 1)
	_, err := f.WriteAt(data, 0)
	require.NoError(t, err)

	p := buffer(t, f, 2*blk, 2)
	n, err := f.ReadAt(p, int64(2*blk))
	assert.Equal(t, blk, n, "a read across the end returns what there is")
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, data[2*blk:], p[:blk])

	n, err = f.ReadAt(p, int64(3*blk))
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF, "a read at the end")
	n, err = f.ReadAt(p, int64(10*blk))
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF, "a read past the end")

	n, err = f.ReadAt(p[:0], 0)
	assert.Equal(t, 0, n)
	assert.NoError(t, err, "an empty read")
}

func (s *suite) truncate(t *testing.T) {
	f, path := s.create(t)
	blk := block(f)
	data := buffer(t, f, 4*blk, 3)
	_, err := f.WriteAt(data, 0)
	require.NoError(t, err)

	// An unaligned size: how a writer cuts its padded tail back.
	logical := int64(blk + 100)
	require.NoError(t, f.Truncate(logical))
	assert.Equal(t, logical, size(t, path))
	p := buffer(t, f, 4*blk, 4)
	n, err := f.ReadAt(p, 0)
	assert.Equal(t, int(logical), n)
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, data[:logical], p[:logical])

	// Growing again reads back zeros past the old end.
	require.NoError(t, f.Truncate(int64(3*blk)))
	n, err = f.ReadAt(p[:3*blk], 0)
	require.NoError(t, err)
	assert.Equal(t, 3*blk, n)
	assert.Equal(t, data[:logical], p[:logical])
	assert.Equal(t, make([]byte, 3*blk-int(logical)), p[logical:3*blk])
}

func (s *suite) sync(t *testing.T) {
	f, path := s.create(t)
	p := buffer(t, f, block(f), 5)
	_, err := f.WriteAt(p, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())

	// What was synced is there for a fresh handle.
	g := s.open(t, path, os.O_RDONLY)
	defer g.Close()
	q := buffer(t, g, block(g), 6)
	_, err = g.ReadAt(q, 0)
	require.NoError(t, err)
	assert.Equal(t, p, q)
}

func (s *suite) concurrentReadAt(t *testing.T) {
	f, _ := s.create(t)
	blk := block(f)
	const blocks = 64
	data := buffer(t, f, blocks*blk, 7)
	_, err := f.WriteAt(data, 0)
	require.NoError(t, err)

	var wg sync.WaitGroup
	for g := range 8 {
		p := buffer(t, f, 4*blk, 0)
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 100 {
				i := r.IntN(blocks - 3)
				n, err := f.ReadAt(p, int64(i*blk))
				if err != nil || n != len(p) || !bytes.Equal(p, data[i*blk:i*blk+len(p)]) {
					t.Errorf("reader %d at block %d: n=%d err=%v, or data differs", g, i, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func (s *suite) alignment(t *testing.T) {
	f, path := s.create(t)
	a := f.Alignment()
	require.Positive(t, a.Memory)
	require.Positive(t, a.Offset)
	blk := block(f)
	p := buffer(t, f, 2*blk, 8)
	_, err := f.WriteAt(p, 0)
	require.NoError(t, err)

	type transfer struct {
		name string
		p    []byte
		off  int64
	}
	var bad []transfer
	if a.Memory > 1 {
		bad = append(bad, transfer{"address", p[1 : 1+blk], 0})
	}
	if a.Offset > 1 {
		bad = append(bad,
			transfer{"offset", p[:blk], int64(a.Offset / 2)},
			transfer{"length", p[:blk-a.Offset/2], 0},
			transfer{"short length", p[:1], 0},
		)
	}
	if len(bad) == 0 {
		// A page-cache file takes any address, offset and length.
		n, err := f.WriteAt(p[1:101], 7)
		assert.NoError(t, err)
		assert.Equal(t, 100, n)
		n, err = f.ReadAt(p[3:103], 7)
		assert.NoError(t, err)
		assert.Equal(t, 100, n)
		return
	}
	for _, tr := range bad {
		for _, op := range []string{"read", "write"} {
			var n int
			var err error
			if op == "read" {
				n, err = f.ReadAt(tr.p, tr.off)
			} else {
				n, err = f.WriteAt(tr.p, tr.off)
			}
			assert.Zero(t, n, "%s with bad %s", op, tr.name)
			require.ErrorIs(t, err, direct.ErrUnaligned, "%s with bad %s", op, tr.name)
			var ue *direct.UnalignedError
			require.True(t, errors.As(err, &ue))
			assert.Equal(t, tr.off, ue.Off)
			assert.Equal(t, len(tr.p), ue.Len)
			assert.Equal(t, a, ue.Align)
			assert.Contains(t, err.Error(), path)
		}
	}
	assert.Equal(t, int64(2*blk), size(t, path), "a refused write changed the file")
}

func (s *suite) negativeOffset(t *testing.T) {
	f, _ := s.create(t)
	p := buffer(t, f, block(f), 9)
	_, err := f.WriteAt(p, -int64(block(f)))
	assert.ErrorIs(t, err, direct.ErrNegativeOffset)
	_, err = f.ReadAt(p, -int64(block(f)))
	assert.ErrorIs(t, err, direct.ErrNegativeOffset)
}

func (s *suite) closed(t *testing.T) {
	f, _ := s.create(t)
	p := buffer(t, f, block(f), 10)
	require.NoError(t, f.Close())
	_, err := f.WriteAt(p, 0)
	assert.Error(t, err)
	_, err = f.ReadAt(p, 0)
	assert.Error(t, err)
	assert.Error(t, f.Sync())
	assert.ErrorIs(t, f.Close(), os.ErrClosed)
}
