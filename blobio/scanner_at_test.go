package blobio_test

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// writeMixed writes blobs of sizes from empty to several buffers long,
// some compressible, and returns them with their offsets.
func writeMixed(t *testing.T, path string, o *blobio.Options) ([][]byte, []int64) {
	t.Helper()
	w, err := blobio.Create(path, o)
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(3, 4))
	var blobs [][]byte
	var offs []int64
	for i := range 500 {
		n := r.IntN(300)
		switch r.IntN(20) {
		case 0:
			n = 0
		case 1:
			n = r.IntN(200 << 10)
		}
		p := content(i, n)
		if i%3 == 0 {
			p = bytes.Repeat([]byte{byte(i)}, n) // compresses, when zstd is on
		}
		off, err := w.WriteBlob(p)
		require.NoError(t, err)
		blobs, offs = append(blobs, p), append(offs, off)
	}
	require.NoError(t, w.Close())
	return blobs, offs
}

// TestReaderReadAt: ReadAt returns the file's bytes, at any offset and
// length, through every I/O path, with io.ReaderAt's end-of-file rules.
func TestReaderReadAt(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			path := filepath.Join(testenv.Dir(t), "at.blob")
			writeMixed(t, path, &blobio.Options{IO: p, Compression: blobio.Zstd})
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			r, err := blobio.Open(path, &blobio.Options{IO: p})
			require.NoError(t, err)
			defer r.Close()

			rng := rand.New(rand.NewPCG(1, 2))
			for range 200 {
				off := rng.Int64N(int64(len(want)))
				n := rng.IntN(300 << 10) // across several aligned reads, sometimes
				got := make([]byte, n)
				k, err := r.ReadAt(got, off)
				end := min(off+int64(n), int64(len(want)))
				require.Equal(t, int(end-off), k, "ReadAt(%d bytes at %d)", n, off)
				if end < off+int64(n) {
					require.ErrorIs(t, err, io.EOF, "a read past the end says io.EOF")
				} else if err != nil {
					require.ErrorIs(t, err, io.EOF, "only io.EOF, and only at the end")
					require.Equal(t, int64(len(want)), end)
				}
				require.True(t, bytes.Equal(want[off:end], got[:k]), "bytes at %d differ", off)
			}
			// iotest reads byte by byte too: a section keeps it quick.
			sec := min(r.Size(), 3000)
			require.NoError(t, iotest.TestReader(io.NewSectionReader(r, r.Size()-sec, sec), want[int64(len(want))-sec:]))

			k, err := r.ReadAt(make([]byte, 10), r.Size())
			assert.Zero(t, k)
			assert.ErrorIs(t, err, io.EOF)
			_, err = r.ReadAt(make([]byte, 10), -1)
			assert.ErrorIs(t, err, blobio.ErrOffset)
			require.NoError(t, r.Close())
			_, err = r.ReadAt(make([]byte, 10), 0)
			assert.ErrorIs(t, err, fs.ErrClosed)
		})
	}
}

// TestReaderReadAtBounded: with Options.Size the bytes end there.
func TestReaderReadAtBounded(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "b.blob")
	_, offs := writeMixed(t, path, nil)
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	size := offs[len(offs)/2]
	r, err := blobio.Open(path, &blobio.Options{Size: size})
	require.NoError(t, err)
	defer r.Close()
	got, err := io.ReadAll(io.NewSectionReader(r, 0, 1<<40))
	require.NoError(t, err)
	require.True(t, bytes.Equal(want[:size], got), "%d bytes read, bound %d", len(got), size)
}

// TestScannerAt: a Scanner started at a blob's offset returns that blob
// and every one after it; one started outside the file fails at once.
func TestScannerAt(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "s.blob")
	blobs, offs := writeMixed(t, path, &blobio.Options{Compression: blobio.Zstd})
	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	for _, k := range []int{0, 1, 17, len(offs) / 2, len(offs) - 1} {
		s := blobio.NewScannerAt(r, offs[k])
		i := k
		for s.Scan() {
			require.Equal(t, offs[i], s.Offset())
			require.True(t, bytes.Equal(blobs[i], s.Bytes()), "blob %d differs, scanning from %d", i, k)
			i++
		}
		require.NoError(t, s.Err())
		require.Equal(t, len(blobs), i, "scanning from blob %d", k)
	}
	s := blobio.NewScannerAt(r, r.Size())
	assert.False(t, s.Scan(), "nothing after the end")
	assert.NoError(t, s.Err())
	for _, off := range []int64{-1, r.Size() + 1} {
		s := blobio.NewScannerAt(r, off)
		assert.False(t, s.Scan())
		assert.ErrorIs(t, s.Err(), blobio.ErrOffset, "from %d", off)
	}
}

// TestScannerClose: Close stops a scan midway and releases it; the Reader
// goes on, and closes cleanly.
func TestScannerClose(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "c.blob")
	blobs, _ := writeMixed(t, path, nil)
	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	for range 3 {
		s := blobio.NewScanner(r)
		for range 10 {
			require.True(t, s.Scan())
		}
		require.NoError(t, s.Close())
		assert.False(t, s.Scan(), "no Scan after Close")
		assert.ErrorIs(t, s.Err(), blobio.ErrClosed)
		assert.Nil(t, s.Bytes())
		require.NoError(t, s.Close(), "a second Close does nothing")
	}
	s := blobio.NewScanner(r) // scanned to the end: Close keeps its nil error
	n := 0
	for s.Scan() {
		n++
	}
	require.Equal(t, len(blobs), n)
	require.NoError(t, s.Close())
	assert.NoError(t, s.Err())
	got, err := r.ReadBlob(0, nil)
	require.NoError(t, err)
	assert.Equal(t, blobs[0], got)
	require.NoError(t, r.Close())
}

// TestScannerReaderAt: a Scanner over an io.ReaderAt walks an
// ephemeral.File, its unflushed tail included, and a plain byte slice.
func TestScannerReaderAt(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: p, BufferSize: 16 << 10})
			require.NoError(t, err)
			defer f.Close()
			var blobs [][]byte
			var offs []int64
			for i := range 2000 {
				v := content(i, (i*37)%5000)
				off, err := f.WriteBlob(v)
				require.NoError(t, err)
				blobs, offs = append(blobs, v), append(offs, off)
			}
			for _, k := range []int{0, 999, len(blobs) - 1} {
				s := blobio.NewScannerReaderAt(f, offs[k], f.Size())
				i := k
				for s.Scan() {
					require.Equal(t, offs[i], s.Offset())
					require.True(t, bytes.Equal(blobs[i], s.Bytes()), "blob %d differs", i)
					i++
				}
				require.NoError(t, s.Err())
				require.Equal(t, len(blobs), i)
				require.NoError(t, s.Close())
			}
		})
	}

	path := filepath.Join(testenv.Dir(t), "mem.blob")
	blobs, _ := writeMixed(t, path, &blobio.Options{IO: fallback.StdFS, Compression: blobio.Zstd})
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	s := blobio.NewScannerReaderAt(bytes.NewReader(data), 0, int64(len(data)))
	i := 0
	for s.Scan() {
		require.True(t, bytes.Equal(blobs[i], s.Bytes()), "blob %d differs", i)
		i++
	}
	require.NoError(t, s.Err())
	require.Equal(t, len(blobs), i)

	s = blobio.NewScannerReaderAt(bytes.NewReader(data[:len(data)-1]), 0, int64(len(data)))
	for s.Scan() {
	}
	require.ErrorIs(t, s.Err(), io.ErrUnexpectedEOF, "a source shorter than its size")
}

// TestReadBlobsReentrant: ReadBlobs calls whose fn reads again, from
// several goroutines at once, never wait for each other's buffers (each
// call holds up to half of the Reader's; two of them held all).
func TestReadBlobsReentrant(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "re.blob")
	w, err := blobio.Create(path, nil)
	require.NoError(t, err)
	var offs []int64
	for i := range 400 {
		off, err := w.WriteBlob(content(i, 20<<10)) // each its own large read
		require.NoError(t, err)
		offs = append(offs, off)
	}
	require.NoError(t, w.Close())
	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()

	done := make(chan error, 4)
	for g := range 4 {
		go func() {
			var one []byte
			at := make([]byte, 100)
			done <- r.ReadBlobs(offs, func(i int, blob []byte) error {
				var err error
				if one, err = r.ReadBlob(offs[(i+g)%len(offs)], one); err != nil {
					return err
				}
				if !bytes.Equal(content((i+g)%len(offs), 20<<10), one) || !bytes.Equal(content(i, 20<<10), blob) {
					return fmt.Errorf("blob %d differs", i)
				}
				_, err = r.ReadAt(at, offs[i])
				return err
			})
		}()
	}
	for range 4 {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Fatal("ReadBlobs whose fn reads again waited for each other")
		}
	}
}
