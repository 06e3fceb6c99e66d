package fileio_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// content returns n bytes that depend on seed and position, so that a
// byte out of place shows.
func content(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 22))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

// writeRandom writes up to total bytes to w in writes of random sizes,
// from single bytes to 300 KiB, with a Sync after some, and returns what
// it wrote.
func writeRandom(t *testing.T, w *fileio.Writer, seed uint64, total int) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	var all []byte
	for len(all) < total {
		var n int
		switch r.IntN(4) {
		case 0:
			n = 1
		case 1:
			n = 1 + r.IntN(512)
		case 2:
			n = 1 + r.IntN(8<<10)
		default:
			n = 1 + r.IntN(300<<10)
		}
		p := content(r.Uint64(), n)
		m, err := w.Write(p)
		require.NoError(t, err)
		require.Equal(t, n, m)
		all = append(all, p...)
		require.Equal(t, int64(len(all)), w.Size())
		if r.IntN(5) == 0 {
			require.NoError(t, w.Sync())
			require.Equal(t, w.Size(), w.Synced())
		}
	}
	return all
}

// TestRoundTrip writes random sizes with Syncs between them, under every
// policy, and reads the file back whole, through os.ReadFile, and by 16
// goroutines at random unaligned offsets and lengths.
func TestRoundTrip(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			dir := testenv.Dir(t)
			path := filepath.Join(dir, "f")
			w, err := fileio.Create(path, &fileio.Options{IO: p})
			require.NoError(t, err)
			want := writeRandom(t, w, 1, 6<<20)
			require.NoError(t, w.Close())
			assert.Equal(t, int64(len(want)), w.Synced())

			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "the file differs from what was written (%d bytes, want %d)", len(got), len(want))

			r, err := fileio.Open(path, &fileio.Options{IO: p})
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, int64(len(want)), r.Size())
			whole := make([]byte, len(want))
			n, err := r.ReadAt(whole, 0)
			require.NoError(t, err, "a read that ends at Size is whole, as os.File's")
			require.Equal(t, len(want), n)
			require.True(t, bytes.Equal(want, whole))

			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for g := range 16 {
				wg.Go(func() {
					rnd := rand.New(rand.NewPCG(uint64(g), 99))
					for range 200 {
						off := rnd.Int64N(int64(len(want)))
						n := 1 + rnd.IntN(min(300<<10, len(want)-int(off)))
						if rnd.IntN(4) == 0 {
							n = 1 + rnd.IntN(5000)
							n = min(n, len(want)-int(off))
						}
						buf := make([]byte, n)
						m, err := r.ReadAt(buf, off)
						if err != nil {
							errs <- fmt.Errorf("ReadAt(%d, %d): %w", n, off, err)
							return
						}
						if m != n || !bytes.Equal(buf, want[off:off+int64(n)]) {
							errs <- fmt.Errorf("ReadAt(%d, %d): wrong bytes (%d read)", n, off, m)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}

			n, err = r.ReadAt(make([]byte, 10), r.Size())
			assert.Zero(t, n)
			assert.ErrorIs(t, err, io.EOF, "ReadAt at Size")
			n, err = r.ReadAt(make([]byte, 10), r.Size()-3)
			assert.Equal(t, 3, n)
			assert.ErrorIs(t, err, io.EOF, "ReadAt across Size")
			_, err = r.ReadAt(make([]byte, 10), -1)
			assert.ErrorIs(t, err, fileio.ErrOffset, "ReadAt at a negative offset")
		})
	}
}

// TestEmptyAndTiny: a file with nothing written, and one of one byte,
// close to their sizes and read back.
func TestEmptyAndTiny(t *testing.T) {
	dir := testenv.Dir(t)
	for _, n := range []int{0, 1, 511, 4097} {
		path := filepath.Join(dir, fmt.Sprint(n))
		w, err := fileio.Create(path, nil)
		require.NoError(t, err)
		want := content(uint64(n), n)
		_, err = w.Write(want)
		require.NoError(t, err)
		require.NoError(t, w.Sync())
		require.NoError(t, w.Close())
		st, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, int64(n), st.Size(), "Close cuts the file to Size")
		r, err := fileio.Open(path, nil)
		require.NoError(t, err)
		got := make([]byte, n+10)
		m, err := r.ReadAt(got, 0)
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, want, got[:m])
		require.NoError(t, r.Close())
	}
}

// TestReadAtLikeOSFile: ReadAt answers as os.File's does at the edges:
// an empty p gives 0 and nil wherever the offset lies, past the end
// included (io.ReaderAt asks nothing else of it), a read at or past the
// end io.EOF, and a negative offset an error (ErrOffset here).
func TestReadAtLikeOSFile(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "f")
	w, err := fileio.Create(path, nil)
	require.NoError(t, err)
	_, err = w.Write(content(5, 5000))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	r, err := fileio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	of, err := os.Open(path)
	require.NoError(t, err)
	defer of.Close()
	for _, off := range []int64{0, 4999, 5000, 5001, 1 << 40} {
		for _, p := range [][]byte{nil, {}, make([]byte, 1)} {
			n, err := r.ReadAt(p, off)
			on, oerr := of.ReadAt(p, off)
			assert.Equal(t, on, n, "ReadAt(%d bytes, %d)", len(p), off)
			assert.Equal(t, oerr, err, "ReadAt(%d bytes, %d)", len(p), off)
		}
	}
	_, oerr := of.ReadAt(nil, -1)
	require.Error(t, oerr)
	_, err = r.ReadAt(nil, -1)
	require.ErrorIs(t, err, fileio.ErrOffset)
}

// TestSize: a Reader opened with Options.Size reads the file as if it
// were that long, and one past the file's end is refused.
func TestSize(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f")
	w, err := fileio.Create(path, nil)
	require.NoError(t, err)
	want := content(3, 100_000)
	_, err = w.Write(want)
	require.NoError(t, err)
	require.NoError(t, w.Sync())
	synced := w.Synced()
	_, err = w.Write(content(4, 5000)) // past the Sync: a crash may lose it
	require.NoError(t, err)

	r, err := fileio.Open(path, &fileio.Options{Size: synced})
	require.NoError(t, err)
	got := make([]byte, 200_000)
	n, err := r.ReadAt(got, 0)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, want, got[:n])
	require.NoError(t, r.Close())
	require.NoError(t, w.Close())

	_, err = fileio.Open(path, &fileio.Options{Size: 1 << 30})
	require.ErrorIs(t, err, fileio.ErrInvalidOptions)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// TestBadOptions: Options no file can take are refused with
// ErrInvalidOptions before a file is created, and leave none.
func TestBadOptions(t *testing.T) {
	dir := testenv.Dir(t)
	misfit, err := aligned.NewPool(4096, 8, 4*4096) // buffers aligned to 8 bytes: no O_DIRECT file takes them
	require.NoError(t, err)
	defer misfit.Close()
	bad := map[string]*fileio.Options{
		"BufferSize":  {BufferSize: -1},
		"Buffers":     {Buffers: -1},
		"TooMany":     {Buffers: 1 << 20},
		"IO":          {IO: fallback.Policy(99)},
		"Size":        {Size: -5},
		"ReadAhead":   {ReadAhead: -1},
		"HugeAhead":   {ReadAhead: fileio.MaxReadAhead + 1}, // 1 TiB failed every Sequential read with ENOMEM
		"MisfitPool":  {Pool: misfit, IO: fallback.Direct},
		"HugeBuffers": {BufferSize: 1 << 62, Buffers: 16},
	}
	for name, o := range bad {
		t.Run(name, func(t *testing.T) {
			if name == "MisfitPool" && testenv.RejectsDirect() {
				t.Skip("needs O_DIRECT")
			}
			_, err := fileio.Create(filepath.Join(dir, name), o)
			require.ErrorIs(t, err, fileio.ErrInvalidOptions)
			_, err = os.Stat(filepath.Join(dir, name))
			require.ErrorIs(t, err, fs.ErrNotExist, "a refused Create left its file")
		})
	}
	testenv.RequireEmpty(t, dir)
	_, err = fileio.Open(filepath.Join(dir, "none"), &fileio.Options{Size: -1})
	require.ErrorIs(t, err, fileio.ErrInvalidOptions)
	_, err = fileio.Open(filepath.Join(dir, "none"), &fileio.Options{ReadAhead: 1 << 40})
	require.ErrorIs(t, err, fileio.ErrInvalidOptions)
	_, err = fileio.OpenAppend(filepath.Join(dir, "none"), -1, nil)
	require.ErrorIs(t, err, fileio.ErrInvalidOptions)
	_, err = fileio.OpenAppend(filepath.Join(dir, "none"), 0, nil)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = fileio.Create(dir, nil)
	require.ErrorIs(t, err, fs.ErrExist, "Create never overwrites")
	_, err = fileio.Open(dir, nil)
	require.Error(t, err, "a directory is not a file to read")
}

// TestClosed: every method of a closed Writer, Reader and Sequential
// returns an error matching fs.ErrClosed, a second Close too.
func TestClosed(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f")
	w, err := fileio.Create(path, nil)
	require.NoError(t, err)
	_, err = w.Write([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, err = w.Write([]byte("y"))
	assert.ErrorIs(t, err, fs.ErrClosed)
	assert.ErrorIs(t, w.Sync(), fs.ErrClosed)
	assert.ErrorIs(t, w.Close(), fs.ErrClosed)
	assert.Equal(t, int64(1), w.Synced(), "Synced is valid after Close")

	r, err := fileio.Open(path, nil)
	require.NoError(t, err)
	s, err := r.NewSequential(0)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	_, err = r.ReadAt(make([]byte, 1), 0)
	assert.ErrorIs(t, err, fs.ErrClosed)
	_, err = r.NewSequential(0)
	assert.ErrorIs(t, err, fs.ErrClosed)
	_, err = s.Read(make([]byte, 1))
	assert.ErrorIs(t, err, fs.ErrClosed, "closing the Reader closes its Sequentials")
	assert.ErrorIs(t, s.Close(), fs.ErrClosed)
	assert.ErrorIs(t, r.Close(), fs.ErrClosed)
	assert.True(t, errors.Is(fileio.ErrClosed, fs.ErrClosed))
}

// TestOpenAppend goes on writing a file from a Synced size: what was
// written after the Sync goes, and the bytes before it stay.
func TestOpenAppend(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			dir := testenv.Dir(t)
			path := filepath.Join(dir, "f")
			w, err := fileio.Create(path, &fileio.Options{IO: p})
			require.NoError(t, err)
			want := content(5, 70_001)
			_, err = w.Write(want)
			require.NoError(t, err)
			require.NoError(t, w.Sync())
			_, err = w.Write(content(6, 3000)) // lost: never synced
			require.NoError(t, err)
			synced := w.Synced()
			require.NoError(t, w.Close())

			w, err = fileio.OpenAppend(path, synced, &fileio.Options{IO: p})
			require.NoError(t, err)
			require.Equal(t, synced, w.Size())
			more := content(7, 12_345)
			_, err = w.Write(more)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(append(want, more...), got))

			_, err = fileio.OpenAppend(path, int64(len(got))+1, nil)
			require.ErrorIs(t, err, fileio.ErrInvalidOptions)
		})
	}
}
