package blobio_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/testenv"
)

// writePlain writes blobs without Checksum and returns the path, the
// offsets and the file's size.
func writePlain(t *testing.T, name string, blobs [][]byte, c blobio.Compression) (string, []int64, int64) {
	t.Helper()
	path := filepath.Join(testenv.Dir(t), name)
	w, err := blobio.Create(path, &blobio.Options{Compression: c})
	require.NoError(t, err)
	var offs []int64
	for _, b := range blobs {
		off, err := w.WriteBlob(b)
		require.NoError(t, err)
		offs = append(offs, off)
	}
	size := w.Size()
	require.NoError(t, w.Close())
	return path, offs, size
}

// TestChecksumWrittenWithout: a file written without Checksum and read
// with it fails at every blob, through ReadBlob, ReadBlobs and a Scanner,
// bounded or not, with ErrCorrupt at the blob's offset and a message that
// names the likelier cause; never as data. The one quiet case, which the
// format cannot tell from a crash, is pinned: a Scanner without Size over
// a file of one blob takes it for a torn tail.
func TestChecksumWrittenWithout(t *testing.T) {
	const hint = "or the file was written without Options.Checksum"
	for _, c := range []blobio.Compression{blobio.None, blobio.Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			path, offs, size := writePlain(t, "plain.blob", sumBlobs(), c)
			for _, o := range []*blobio.Options{{Checksum: true}, {Checksum: true, Size: size}} {
				r, err := blobio.Open(path, o)
				require.NoError(t, err)
				for _, off := range offs {
					b, err := r.ReadBlob(off, nil)
					requireCorruptAt(t, err, off, "ReadBlob")
					assert.Contains(t, err.Error(), hint)
					assert.Empty(t, b)
				}
				err = r.ReadBlobs(offs, func(int, []byte) error { return nil })
				require.ErrorIs(t, err, blobio.ErrCorrupt)
				assert.Contains(t, err.Error(), hint)
				s := blobio.NewScanner(r)
				require.False(t, s.Scan(), "a Scanner returned a blob of a file written without Checksum")
				requireCorruptAt(t, s.Err(), 0, "Scanner")
				assert.False(t, s.Torn(), "blobs follow the first: corruption, not a torn tail")
				require.NoError(t, r.Close())
			}

			one, _, size := writePlain(t, "one.blob", [][]byte{content(9, 500)}, c)
			r, err := blobio.Open(one, &blobio.Options{Checksum: true})
			require.NoError(t, err)
			s := blobio.NewScanner(r)
			require.False(t, s.Scan())
			require.NoError(t, s.Err(), "the format cannot tell this file from one whose only blob a crash tore")
			assert.True(t, s.Torn())
			assert.Equal(t, int64(0), s.End())
			require.NoError(t, r.Close())
			r, err = blobio.Open(one, &blobio.Options{Checksum: true, Size: size})
			require.NoError(t, err)
			defer r.Close()
			s = blobio.NewScanner(r)
			require.False(t, s.Scan())
			requireCorruptAt(t, s.Err(), 0, "with Size every mismatch is an error")
		})
	}
}

// TestChecksumReadWithout: a file written with Checksum and opened
// without it is refused by Open, which finds its first blob sealed, with
// an error matching ErrInvalidOptions that names Checksum, whether the
// blob is stored plain or compressed, bounded or not, and even when that
// blob is empty; never handed back with its CRC as data. A file whose
// first blob lies past what Open looks at is the documented exception.
func TestChecksumReadWithout(t *testing.T) {
	for _, c := range []blobio.Compression{blobio.None, blobio.Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			path, _, size := writeSummed(t, c)
			for _, o := range []*blobio.Options{nil, {Compression: c}, {Size: size}} {
				r, err := blobio.Open(path, o)
				if err == nil {
					r.Close()
				}
				require.ErrorIs(t, err, blobio.ErrInvalidOptions, "%+v", o)
				assert.Contains(t, err.Error(), "written with Options.Checksum")
			}
			r, err := blobio.Open(path, &blobio.Options{Checksum: true})
			require.NoError(t, err, "with Checksum it opens")
			require.NoError(t, r.Close())
		})
	}
	empty := filepath.Join(testenv.Dir(t), "empty.blob")
	w, err := blobio.Create(empty, &blobio.Options{Checksum: true})
	require.NoError(t, err)
	_, err = w.WriteBlob(nil)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, err = blobio.Open(empty, nil)
	require.ErrorIs(t, err, blobio.ErrInvalidOptions, "an empty blob carries its seal too")

	// A first blob longer than Open looks: not found, and read as the
	// rule says, its payload then its CRC.
	big := filepath.Join(testenv.Dir(t), "big.blob")
	w, err = blobio.Create(big, &blobio.Options{Checksum: true})
	require.NoError(t, err)
	payload := content(3, 100<<10)
	_, err = w.WriteBlob(payload)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	r, err := blobio.Open(big, nil)
	require.NoError(t, err)
	defer r.Close()
	got, err := r.ReadBlob(0, nil)
	require.NoError(t, err)
	require.Len(t, got, len(payload)+4)
	assert.True(t, bytes.Equal(payload, got[:len(payload)]), "the payload, then the CRC")
}
