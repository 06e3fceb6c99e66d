package ephemeral_test

import (
	"bytes"
	"io"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestErrorWords: a negative offset, to ReadAt or ReadBlob, and a blob
// offset past Size match ErrOffset, as fileio's and blobio's do (and
// blobio.ErrOffset, ReadBlob's offsets being blob offsets); a corrupt
// header is a *blobio.CorruptError matching blobio.ErrCorrupt. Every
// message names the package the caller called, never blobio.
func TestErrorWords(t *testing.T) {
	f, err := ephemeral.Create(testenv.Dir(t), nil)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write([]byte{2, 'o', 'k', 0xa0, 0, 0, 1})
	require.NoError(t, err)
	check := func(err error) {
		t.Helper()
		require.Error(t, err)
		assert.Regexp(t, "^ephemeral: ", err.Error())
		assert.NotContains(t, err.Error(), "blobio")
	}
	_, err = f.ReadAt(make([]byte, 1), -1)
	check(err)
	assert.ErrorIs(t, err, ephemeral.ErrOffset)
	for _, off := range []int64{-1, 7, 100} {
		_, err = f.ReadBlob(off, nil)
		check(err)
		assert.ErrorIs(t, err, ephemeral.ErrOffset, "blob at %d", off)
		assert.ErrorIs(t, err, blobio.ErrOffset, "blob at %d", off)
	}
	_, err = f.ReadBlob(3, nil)
	check(err)
	var ce *blobio.CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(3), ce.Off)
	assert.ErrorIs(t, err, blobio.ErrCorrupt)
	assert.NotErrorIs(t, err, ephemeral.ErrOffset)
}

// TestLatentSector: the part of a File on disk is read through the
// reader core, which splits a read that fails with EIO into its sectors:
// with one bad 4 KiB run (a fault plan failing every read that covers
// it), a ReadAt over it returns every byte before the run and a
// *direct.SectorError naming it, ReadBlob fails only for the blobs that
// reach into the run, and a scan of every blob in order (the sequential
// window's reads, 512 KiB each, cover the run) gets the same.
func TestLatentSector(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			const badOff, badLen = 1 << 20, 4096
			f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: p, Faults: faults.NewPlan(faults.BadSectors(badOff, badLen))})
			require.NoError(t, err)
			defer f.Close()
			var offs []int64
			var blobs [][]byte
			for f.Size() < 4<<20 {
				b := bytes.Repeat([]byte{byte(len(offs))}, 300+len(offs)%700)
				off, err := f.WriteBlob(b)
				require.NoError(t, err)
				offs, blobs = append(offs, off), append(blobs, b)
			}
			require.NoError(t, f.Flush())

			got := make([]byte, 8192)
			n, err := f.ReadAt(got, badOff-1000)
			require.ErrorIs(t, err, syscall.EIO)
			var se *direct.SectorError
			require.ErrorAs(t, err, &se)
			assert.True(t, se.Off >= badOff && se.Off < badOff+badLen, "the error names the bad run: %v", err)
			assert.Equal(t, 1000, n, "the bytes before the run")
			_, err = f.ReadAt(got[:1000], badOff-1000)
			require.NoError(t, err, "before the run")

			for _, scan := range []bool{false, true} {
				bad := 0
				for i, off := range offs {
					if !scan && i%3 != 0 {
						continue // random reads: every third blob
					}
					blob, err := f.ReadBlob(off, nil)
					end := off + int64(blobio.HeaderSize(len(blobs[i]), blobio.None)+len(blobs[i]))
					if off < badOff+badLen && badOff < end {
						require.ErrorIs(t, err, syscall.EIO, "blob %d at %d", i, off)
						require.ErrorAs(t, err, &se)
						bad++
						continue
					}
					require.NoError(t, err, "blob %d at %d, scan %v", i, off, scan)
					require.True(t, bytes.Equal(blobs[i], blob), "blob %d", i)
				}
				if scan {
					assert.Positive(t, bad, "no blob reached into the run")
				}
			}
			_, err = f.ReadAt(got, f.Size()-10)
			require.ErrorIs(t, err, io.EOF)
		})
	}
}
