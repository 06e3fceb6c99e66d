package blobio_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// record is blob i of a log: n bytes that say which blob they are.
func record(i, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(1 + (j*11+i*17)%250)
	}
	return p
}

// logBlob is a blob written and where.
type logBlob struct {
	off  int64
	data []byte
}

// appendRecords writes count records from number first, of sizes that
// leave tails in every position of a block, and returns them.
func appendRecords(t *testing.T, w *blobio.Writer, first, count int) []logBlob {
	t.Helper()
	var bs []logBlob
	for i := first; i < first+count; i++ {
		data := record(i, (i*389)%3000)
		want := w.Size()
		off, err := w.WriteBlob(data)
		require.NoError(t, err)
		require.Equal(t, want, off)
		bs = append(bs, logBlob{off, data})
	}
	return bs
}

// checkLog scans path and reads each blob by offset: it must hold exactly
// want, in order.
func checkLog(t *testing.T, path string, want []logBlob) {
	t.Helper()
	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	s := blobio.NewScanner(r)
	n := 0
	for s.Scan() {
		require.Less(t, n, len(want), "a blob past the expected ones, at %d", s.Offset())
		require.Equal(t, want[n].off, s.Offset(), "blob %d", n)
		require.True(t, bytes.Equal(want[n].data, s.Bytes()), "blob %d differs", n)
		n++
	}
	require.NoError(t, s.Err())
	require.Equal(t, len(want), n, "blobs scanned")
	for i, b := range want {
		got, err := r.ReadBlob(b.off, nil)
		require.NoError(t, err)
		require.True(t, bytes.Equal(b.data, got), "ReadBlob of blob %d differs", i)
	}
}

// TestOpenAppend: a file closed cleanly is continued at its size, the
// next blob lands there, through one more Sync and Close, and every blob
// of both writers reads back; the last block, unaligned, is carried over.
func TestOpenAppend(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			path := filepath.Join(testenv.Dir(t), "log.blob")
			o := &blobio.Options{IO: p, BufferSize: 8192, Buffers: 4}
			w, err := blobio.Create(path, o)
			require.NoError(t, err)
			want := appendRecords(t, w, 0, 37)
			require.NoError(t, w.Close())
			size := w.Size()
			require.NotZero(t, size%512, "the test wants an unaligned tail")

			for round := range 3 {
				w, err = blobio.OpenAppend(path, size, o)
				require.NoError(t, err, "round %d", round)
				assert.Equal(t, size, w.Size())
				assert.Equal(t, size, w.Synced())
				if p != fallback.StdFS && p != fallback.DontCache && !testenv.RejectsDirect() {
					assert.True(t, w.Mode().Direct, "%v", w.Mode())
				}
				want = append(want, appendRecords(t, w, len(want), 20)...)
				require.NoError(t, w.Sync())
				want = append(want, appendRecords(t, w, len(want), 30)...)
				require.NoError(t, w.Close())
				size = w.Size()
				st, err := os.Stat(path)
				require.NoError(t, err)
				require.Equal(t, size, st.Size())
			}
			checkLog(t, path, want)
		})
	}
}

// TestOpenAppendAfterCrash: the file of a writer that crashed after a
// Sync holds the synced blobs, then blobs never synced and zeros grown
// ahead, and garbage for all we know; OpenAppend at the Synced recorded
// cuts that tail off and continues as if the writer had never gone on.
func TestOpenAppendAfterCrash(t *testing.T) {
	for _, p := range testenv.Policies() {
		for _, synced := range []int{0, 1, 23} {
			t.Run(fmt.Sprintf("%v/synced=%d", p, synced), func(t *testing.T) {
				path := filepath.Join(testenv.Dir(t), "log.blob")
				o := &blobio.Options{IO: p, BufferSize: 4096}
				w, err := blobio.Create(path, o)
				require.NoError(t, err)
				want := appendRecords(t, w, 0, synced)
				require.NoError(t, w.Sync())
				recorded := w.Synced()
				appendRecords(t, w, synced, 40) // lost in the crash
				require.NoError(t, w.Close())

				// The crash: a torn tail, garbage, and zeros grown ahead.
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				require.NoError(t, err)
				st, err := f.Stat()
				require.NoError(t, err)
				_, err = f.WriteAt([]byte{0x80, 0x01, 0x00}, st.Size())
				require.NoError(t, err)
				require.NoError(t, f.Truncate(st.Size()+1<<20))
				require.NoError(t, f.Close())

				w, err = blobio.OpenAppend(path, recorded, o)
				require.NoError(t, err)
				assert.Equal(t, recorded, w.Size())
				assert.Equal(t, recorded, w.Synced())
				want = append(want, appendRecords(t, w, 1000, 25)...)
				require.NoError(t, w.Sync())
				assert.Equal(t, w.Size(), w.Synced())
				require.NoError(t, w.Close())
				checkLog(t, path, want)
			})
		}
	}
}

// TestOpenAppendRefuses: a size outside the file is refused as invalid
// and the file is left alone; a missing file is fs.ErrNotExist.
func TestOpenAppendRefuses(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "log.blob")
	w, err := blobio.Create(path, nil)
	require.NoError(t, err)
	appendRecords(t, w, 0, 10)
	require.NoError(t, w.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	for _, size := range []int64{-1, int64(len(before)) + 1} {
		_, err = blobio.OpenAppend(path, size, nil)
		require.ErrorIs(t, err, blobio.ErrInvalidOptions, "size %d", size)
		assert.NotContains(t, err.Error(), "appender")
	}
	_, err = blobio.OpenAppend(path, 0, &blobio.Options{Buffers: -1})
	require.ErrorIs(t, err, blobio.ErrInvalidOptions)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a refused OpenAppend changed the file")

	_, err = blobio.OpenAppend(filepath.Join(dir, "missing.blob"), 0, nil)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, blobio.ErrInvalidOptions)
}

// TestOpenAppendChecksum: OpenAppend refuses a Checksum other than the
// one the file's first blob was written with, as Open does, and leaves
// the file as it was: blobs appended the other way were read as a torn
// tail (sealed file, unsealed blob: a Scanner stopped before it with a
// nil Err, the blob acknowledged and lost) or refused the whole file.
// With the same Checksum every blob of both writers reads back.
func TestOpenAppendChecksum(t *testing.T) {
	dir := testenv.Dir(t)
	for _, written := range []bool{true, false} {
		path := filepath.Join(dir, fmt.Sprintf("sum-%v.blob", written))
		w, err := blobio.Create(path, &blobio.Options{Checksum: written})
		require.NoError(t, err)
		first := appendRecords(t, w, 0, 5)
		require.NoError(t, w.Close())
		size := w.Synced()
		before, err := os.ReadFile(path)
		require.NoError(t, err)

		_, err = blobio.OpenAppend(path, size, &blobio.Options{Checksum: !written})
		require.ErrorIs(t, err, blobio.ErrInvalidOptions, "written with Checksum %v, appended to without", written)
		assert.Contains(t, err.Error(), "Checksum")
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, before, after, "a refused OpenAppend changed the file")

		w, err = blobio.OpenAppend(path, size, &blobio.Options{Checksum: written})
		require.NoError(t, err)
		more := appendRecords(t, w, 5, 5)
		require.NoError(t, w.Close())
		r, err := blobio.Open(path, &blobio.Options{Checksum: written})
		require.NoError(t, err)
		sc := blobio.NewScanner(r)
		n := 0
		for sc.Scan() {
			n++
		}
		require.NoError(t, sc.Err())
		assert.False(t, sc.Torn())
		assert.Equal(t, len(first)+len(more), n, "blobs scanned")
		r.Close()
	}
}
