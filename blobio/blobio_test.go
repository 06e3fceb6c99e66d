package blobio_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenSizes are the blob sizes of testdata/golden.blob: each side of the
// 1-byte header limit, of 8 KiB and 64 KiB buffers, and one larger than a
// buffer.
var goldenSizes = []int{0, 1, 127, 128, 129, 8191, 8192, 65535, 65536, 1 << 20}

// content is blob i's deterministic bytes.
func content(i, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte((j*7 + i*13) % 251)
	}
	return p
}

type goldenBlob struct {
	Offset int64  `json:"offset"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
}

func sum(p []byte) string { s := sha256.Sum256(p); return hex.EncodeToString(s[:]) }

func TestGolden(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			path := filepath.Join(testenv.Dir(t), "golden.blob")
			w, err := blobio.Create(path, &blobio.Options{IO: p, BufferSize: 8 << 10})
			require.NoError(t, err)
			var want []goldenBlob
			for i, n := range goldenSizes {
				p := content(i, n)
				off, err := w.WriteBlob(p)
				require.NoError(t, err)
				want = append(want, goldenBlob{off, n, sum(p)})
			}
			require.NoError(t, w.Close())
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			index, err := json.MarshalIndent(want, "", "  ")
			require.NoError(t, err)
			if *update {
				require.NoError(t, os.WriteFile("testdata/golden.blob", got, 0o644))
				require.NoError(t, os.WriteFile("testdata/golden.json", append(index, '\n'), 0o644))
			}
			golden, err := os.ReadFile("testdata/golden.blob")
			require.NoError(t, err)
			require.True(t, bytes.Equal(golden, got), "the writer's bytes differ from testdata/golden.blob (%d vs %d bytes)", len(got), len(golden))
			goldenIndex, err := os.ReadFile("testdata/golden.json")
			require.NoError(t, err)
			assert.JSONEq(t, string(goldenIndex), string(index))
		})
	}
}

func TestReadGolden(t *testing.T) {
	for _, name := range []string{"golden", "golden-zstd"} {
		t.Run(name, func(t *testing.T) {
			var want []goldenBlob
			index, err := os.ReadFile("testdata/" + name + ".json")
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(index, &want))
			// Copy to the filesystem under test, to read it through its path.
			data, err := os.ReadFile("testdata/" + name + ".blob")
			require.NoError(t, err)
			path := filepath.Join(testenv.Dir(t), name+".blob")
			require.NoError(t, os.WriteFile(path, data, 0o644))

			r, err := blobio.Open(path, nil)
			require.NoError(t, err)
			defer r.Close()
			var buf []byte
			for _, b := range want {
				buf, err = r.ReadBlob(b.Offset, buf)
				require.NoError(t, err)
				assert.Equal(t, b.Size, len(buf))
				assert.Equal(t, b.SHA256, sum(buf), "blob at %d", b.Offset)
			}
			var offs []int64
			for _, b := range want {
				offs = append(offs, b.Offset)
			}
			for _, o := range []*blobio.Options{{Size: int64(len(data))}, nil} {
				r, err := blobio.Open(path, o)
				require.NoError(t, err)
				n := len(want)
				if o == nil {
					n = writtenPrefix(t, path, offs)
				}
				s := blobio.NewScanner(r)
				i := 0
				for s.Scan() {
					require.Less(t, i, n)
					assert.Equal(t, want[i].Offset, s.Offset())
					assert.Equal(t, want[i].SHA256, sum(s.Bytes()))
					i++
				}
				require.NoError(t, s.Err())
				assert.Equal(t, n, i, "options %+v", o)
				require.NoError(t, r.Close())
			}
		})
	}
}

func TestZstd(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "z.blob")
	w, err := blobio.Create(path, &blobio.Options{Compression: blobio.Zstd})
	require.NoError(t, err)
	compressible := bytes.Repeat([]byte("neon pageserver "), 512) // 8 KiB
	random := make([]byte, 8192)
	rand.NewChaCha8([32]byte{3}).Read(random)
	small := compressible[:100] // under 128 bytes: never compressed
	var offs []int64
	for _, p := range [][]byte{compressible, random, small} {
		off, err := w.WriteBlob(p)
		require.NoError(t, err)
		offs = append(offs, off)
	}
	require.NoError(t, w.Close())

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, byte(0x90), raw[offs[0]]&0xf0, "a compressible blob is stored with zstd")
	assert.Less(t, offs[1]-offs[0], int64(1000), "the compressed blob is small")
	assert.Equal(t, byte(0x80), raw[offs[1]]&0xf0, "an incompressible blob is stored raw")
	assert.Equal(t, byte(100), raw[offs[2]], "a short blob keeps its 1-byte header")

	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	for i, want := range [][]byte{compressible, random, small} {
		got, err := r.ReadBlob(offs[i], nil)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "blob %d", i)
	}

	if *update {
		index, _ := json.MarshalIndent([]goldenBlob{{offs[0], len(compressible), sum(compressible)}}, "", "  ")
		require.NoError(t, os.WriteFile("testdata/golden-zstd.blob", raw[:offs[1]], 0o644))
		require.NoError(t, os.WriteFile("testdata/golden-zstd.json", append(index, '\n'), 0o644))
	}
}

// TestRoundTrip writes random blobs across buffer boundaries with several
// buffer sizes and counts, syncing at random points, and reads them back by
// offset and by scanning.
func TestRoundTrip(t *testing.T) {
	for _, p := range testenv.Policies() {
		for _, bufSize := range []int{4 << 10, 64 << 10} {
			for _, buffers := range []int{1, 2, 4} {
				name := fmt.Sprintf("%v/buffer=%dKiB/buffers=%d", p, bufSize>>10, buffers)
				t.Run(name, func(t *testing.T) {
					roundTrip(t, &blobio.Options{IO: p, BufferSize: bufSize, Buffers: buffers}, uint64(bufSize+buffers))
				})
			}
		}
	}
}

func roundTrip(t *testing.T, o *blobio.Options, seed uint64) {
	path := filepath.Join(testenv.Dir(t), "r.blob")
	w, err := blobio.Create(path, o)
	require.NoError(t, err)
	if testenv.RejectsDirect() {
		assert.Equal(t, "std-fs", w.Mode().Name())
	}
	r := rand.New(rand.NewPCG(seed, 7))
	var blobs [][]byte
	var offs []int64
	var total int64
	for i := range 400 {
		n := r.IntN(200)
		switch r.IntN(10) {
		case 0:
			n = r.IntN(3 * o.BufferSize) // larger than a buffer, sometimes
		case 1:
			n = 128
		}
		p := content(i, n)
		off, err := w.WriteBlob(p)
		require.NoError(t, err)
		require.Equal(t, total, off)
		total += int64(blobio.HeaderSize(n, blobio.None) + n)
		assert.Equal(t, total, w.Size())
		blobs, offs = append(blobs, p), append(offs, off)
		if r.IntN(50) == 0 {
			require.NoError(t, w.Sync())
			st, err := os.Stat(path)
			require.NoError(t, err)
			require.GreaterOrEqual(t, st.Size(), total, "after Sync the file covers the data")
			require.Equal(t, total, w.Synced())
			checkBlobs(t, path, total, blobs, offs)
		}
	}
	require.NoError(t, w.Close())
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, total, st.Size())
	checkBlobs(t, path, total, blobs, offs)
}

// checkBlobs reads blobs back from path, whose logical size (Synced, or
// the size after Close) is size: by offset, by a scan bounded by size and
// by an unbounded one.
func checkBlobs(t *testing.T, path string, size int64, blobs [][]byte, offs []int64) {
	t.Helper()
	rd, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer rd.Close()
	var buf []byte
	for i := len(blobs) - 1; i >= 0; i-- { // backwards: no help from the window
		buf, err = rd.ReadBlob(offs[i], buf)
		require.NoError(t, err, "blob %d at %d", i, offs[i])
		require.True(t, bytes.Equal(blobs[i], buf), "blob %d at %d differs", i, offs[i])
	}
	scanBlobs(t, path, &blobio.Options{Size: size}, blobs, offs, len(blobs))
	scanBlobs(t, path, nil, blobs, offs, writtenPrefix(t, path, offs))
}

// scanBlobs scans the file at path, opened with o, and checks that it holds
// the first want of blobs at offs, and nothing else.
func scanBlobs(t *testing.T, path string, o *blobio.Options, blobs [][]byte, offs []int64, want int) {
	t.Helper()
	rd, err := blobio.Open(path, o)
	require.NoError(t, err)
	defer rd.Close()
	s := blobio.NewScanner(rd)
	i := 0
	for s.Scan() {
		require.Less(t, i, want, "more blobs than written")
		require.Equal(t, offs[i], s.Offset())
		require.True(t, bytes.Equal(blobs[i], s.Bytes()), "scanned blob %d differs", i)
		i++
	}
	require.NoError(t, s.Err())
	require.Equal(t, want, i, "blobs scanned (options %+v)", o)
}

// writtenPrefix returns how many of the blobs at offs a Scanner without
// Options.Size returns: all, up to the first whose header is a 0x00 byte,
// which it takes for the end of the written data. (A writer that gives an
// empty blob a 4-byte header never writes one.)
func writtenPrefix(t *testing.T, path string, offs []int64) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	for i, off := range offs {
		if raw[off] == 0 {
			return i
		}
	}
	return len(offs)
}

func TestCloseNoSync(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "n.blob")
	w, err := blobio.Create(path, &blobio.Options{NoSync: true})
	require.NoError(t, err)
	var offs []int64
	var blobs [][]byte
	for i := range 300 {
		p := content(i, i*7)
		off, err := w.WriteBlob(p)
		require.NoError(t, err)
		offs, blobs = append(offs, off), append(blobs, p)
	}
	size := w.Size()
	require.NoError(t, w.Close())
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, size, st.Size(), "NoSync still truncates to the logical size")
	checkBlobs(t, path, size, blobs, offs)
}

func TestWriterErrors(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "e.blob")
	w, err := blobio.Create(path, nil)
	require.NoError(t, err)

	huge := make([]byte, blobio.MaxBlobSize+1) // never touched: refused by its length
	_, err = w.WriteBlob(huge)
	require.ErrorIs(t, err, blobio.ErrBlobTooLarge)
	off, err := w.WriteBlob([]byte("still usable"))
	require.NoError(t, err, "ErrBlobTooLarge leaves the writer usable")
	assert.Zero(t, off)

	require.NoError(t, w.Close())
	_, err = w.WriteBlob([]byte("x"))
	assert.ErrorIs(t, err, blobio.ErrClosed)
	assert.ErrorIs(t, w.Sync(), blobio.ErrClosed)
	assert.ErrorIs(t, w.Close(), blobio.ErrClosed)

	_, err = blobio.Create(path, nil)
	assert.ErrorIs(t, err, fs.ErrExist, "Create never overwrites")
	_, err = blobio.Create(filepath.Join(dir, "missing", "f.blob"), nil)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = blobio.Create(dir, nil)
	assert.ErrorIs(t, err, fs.ErrExist, "a directory where a file is expected")
	_, err = blobio.Create(filepath.Join(dir, "c.blob"), &blobio.Options{Compression: 7})
	assert.ErrorContains(t, err, "unknown compression")
	_, err = os.Lstat(filepath.Join(dir, "c.blob"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "a refused Create left a file")
}

func TestReaderErrors(t *testing.T) {
	dir := testenv.Dir(t)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		return p
	}
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"reserved bits", []byte{0xa0, 0, 0, 1, 0}, blobio.ErrCorrupt},
		{"truncated header", []byte{0x80, 0}, io.ErrUnexpectedEOF},
		{"truncated blob", append([]byte{0x80, 0, 1, 0}, make([]byte, 100)...), io.ErrUnexpectedEOF},
		{"short blob truncated", []byte{5, 1, 2}, io.ErrUnexpectedEOF},
		{"bad zstd", []byte{0x90, 0, 0, 3, 1, 2, 3}, blobio.ErrCorrupt},
	}
	for _, c := range cases {
		path := write(c.name, c.data)
		r, err := blobio.Open(path, nil)
		require.NoError(t, err)
		_, err = r.ReadBlob(0, nil)
		assert.ErrorIs(t, err, c.want, "%s: ReadBlob", c.name)
		s := blobio.NewScanner(r)
		assert.False(t, s.Scan())
		if c.want == io.ErrUnexpectedEOF {
			// Without Options.Size a blob the end of the file cuts short
			// is the tail a crash tore: the scan ends there, quietly.
			assert.NoError(t, s.Err(), "%s: Scanner", c.name)
			assert.True(t, s.Torn(), "%s: Scanner", c.name)
			assert.Zero(t, s.End(), "%s: Scanner", c.name)
		} else {
			assert.ErrorIs(t, s.Err(), c.want, "%s: Scanner", c.name)
			assert.False(t, s.Torn(), "%s: Scanner", c.name)
		}
		require.NoError(t, r.Close())

		// With Options.Size every blob must be whole: a cut one is an error.
		r, err = blobio.Open(path, &blobio.Options{Size: int64(len(c.data))})
		require.NoError(t, err)
		s = blobio.NewScanner(r)
		assert.False(t, s.Scan())
		assert.ErrorIs(t, s.Err(), c.want, "%s: Scanner with Size", c.name)
		assert.False(t, s.Torn(), "%s: Scanner with Size", c.name)
		require.NoError(t, r.Close())
	}

	r, err := blobio.Open(write("ok", []byte{1, 'x'}), nil)
	require.NoError(t, err)
	for _, off := range []int64{-1, 2, 1 << 40} {
		_, err = r.ReadBlob(off, nil)
		assert.ErrorIs(t, err, blobio.ErrOffset, "offset %d", off)
	}
	s := blobio.NewScanner(r)
	require.NoError(t, r.Close())
	assert.False(t, s.Scan())
	_, err = r.ReadBlob(0, nil)
	assert.ErrorIs(t, err, blobio.ErrClosed)
	assert.ErrorIs(t, r.Close(), blobio.ErrClosed)

	_, err = blobio.Open(filepath.Join(dir, "missing"), nil)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = blobio.Open(dir, nil)
	assert.Error(t, err, "a directory")

	empty, err := blobio.Open(write("empty", nil), nil)
	require.NoError(t, err)
	defer empty.Close()
	s = blobio.NewScanner(empty)
	assert.False(t, s.Scan())
	assert.NoError(t, s.Err(), "an empty file has no blobs and no error")
}

// TestSharedPool runs writers on one pool: their buffers never exceed its
// budget and all come back.
func TestSharedPool(t *testing.T) {
	dir := testenv.Dir(t)
	pool, err := aligned.NewPool(8<<10, 4096, 6*(8<<10))
	require.NoError(t, err)
	defer pool.Close()
	var ws []*blobio.Writer
	for i := range 3 {
		w, err := blobio.Create(filepath.Join(dir, fmt.Sprint(i)), &blobio.Options{Pool: pool, Buffers: 2})
		require.NoError(t, err)
		ws = append(ws, w)
	}
	for i := range 2000 {
		_, err := ws[i%3].WriteBlob(content(i, 100))
		require.NoError(t, err)
	}
	for _, w := range ws {
		require.NoError(t, w.Close())
	}
	st := pool.Stats()
	assert.LessOrEqual(t, st.HighWater, 6)
	assert.Zero(t, st.InUse, "buffers not returned")
}

func TestCreateLeavesNothingOnError(t *testing.T) {
	dir := testenv.Dir(t)
	pool, err := aligned.NewPool(4096, 4096, 4096)
	require.NoError(t, err)
	pool.Close()
	_, err = blobio.Create(filepath.Join(dir, "f"), &blobio.Options{Pool: pool})
	require.True(t, errors.Is(err, aligned.ErrPoolClosed), "%v", err)
	_, err = os.Lstat(filepath.Join(dir, "f"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}
