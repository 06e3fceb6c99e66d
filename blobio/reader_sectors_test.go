package blobio_test

import (
	"bytes"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestLatentSectors: with one bad 4 KiB run in the file (a fault plan
// failing every read that covers it), ReadBlob fails with EIO and a
// *direct.SectorError naming the run only for the blobs that reach into
// it and returns every other; ReadBlobs fails at such a blob, and over
// the other offsets succeeds, though its merged reads cover the run; a
// Scanner yields every blob before the run and fails at the first that
// reaches into it, and one started past the run reads on to the end.
func TestLatentSectors(t *testing.T) {
	path, blobs, offs := randomFile(t, 7, 400, blobio.None)
	k := len(offs) / 2
	badOff := offs[k] &^ 4095
	const badLen = 4096
	concerns := func(i int) bool {
		end := offs[i] + int64(blobio.HeaderSize(len(blobs[i]), blobio.None)+len(blobs[i]))
		return offs[i] < badOff+badLen && badOff < end
	}
	require.True(t, concerns(k))
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			r, err := blobio.Open(path, &blobio.Options{IO: p, Faults: faults.NewPlan(faults.BadSectors(badOff, badLen))})
			require.NoError(t, err)
			defer r.Close()
			var good []int64
			var goodBlobs [][]byte
			bad := 0
			for i, off := range offs {
				got, err := r.ReadBlob(off, nil)
				if concerns(i) {
					bad++
					require.ErrorIs(t, err, syscall.EIO, "blob %d at %d", i, off)
					var se *direct.SectorError
					require.ErrorAs(t, err, &se)
					assert.True(t, se.Off >= badOff && se.Off+int64(se.Len) <= badOff+badLen, "the error names the bad run: %v", err)
					continue
				}
				require.NoError(t, err, "blob %d at %d is not in the bad run", i, off)
				require.True(t, bytes.Equal(blobs[i], got), "blob %d", i)
				good, goodBlobs = append(good, off), append(goodBlobs, blobs[i])
			}
			t.Logf("%d of %d blobs reach into the bad run [%d, %d)", bad, len(offs), badOff, badOff+badLen)

			err = r.ReadBlobs(offs, func(i int, blob []byte) error {
				require.True(t, bytes.Equal(blobs[i], blob), "blob %d", i)
				return nil
			})
			var be *blobio.BlobError
			require.ErrorAs(t, err, &be)
			assert.ErrorIs(t, err, syscall.EIO)
			assert.True(t, concerns(be.Index), "ReadBlobs failed at blob %d, which the bad run does not concern: %v", be.Index, err)

			n := 0
			require.NoError(t, r.ReadBlobs(good, func(i int, blob []byte) error {
				n++
				require.True(t, bytes.Equal(goodBlobs[i], blob), "blob at %d", good[i])
				return nil
			}))
			assert.Equal(t, len(good), n)

			// The Scanner yields every blob before the first the run
			// concerns, then fails there naming the run; one started
			// past the run scans the rest.
			first := slices.IndexFunc(offs, func(o int64) bool { return concerns(indexOf(offs, o)) })
			gotOffs, gotBlobs, err := scanAll(t, r)
			require.ErrorIs(t, err, syscall.EIO, "the scan reaches the bad run")
			var se *direct.SectorError
			require.ErrorAs(t, err, &se)
			assert.True(t, se.Off >= badOff && se.Off+int64(se.Len) <= badOff+badLen, "the error names the bad run: %v", err)
			assert.Contains(t, err.Error(), fmt.Sprintf("blob at %d", offs[first]))
			require.Equal(t, offs[:first], gotOffs, "every blob before the run, in order")
			for i := range gotBlobs {
				require.Equal(t, string(blobs[i]), gotBlobs[i], "blob %d", i)
			}
			after := slices.IndexFunc(offs, func(o int64) bool { return o >= badOff+badLen })
			sc := blobio.NewScannerAt(r, offs[after])
			k := after
			for sc.Scan() {
				require.Equal(t, offs[k], sc.Offset())
				require.True(t, bytes.Equal(blobs[k], sc.Bytes()), "blob %d", k)
				k++
			}
			require.NoError(t, sc.Err(), "past the run")
			assert.Equal(t, len(offs), k)
		})
	}
}
