package blobio_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/testenv"
)

// sumBlobs are the blobs the checksum tests write: empty, short-header,
// long-header, one past the Writer's small-copy limit, one larger than a
// read buffer, and compressible ones (zstd with Options.Compression).
func sumBlobs() [][]byte {
	return [][]byte{
		{},
		[]byte("x"),
		content(1, 100),
		content(2, 123), // 127 with its CRC: the longest 1-byte header
		content(3, 124), // 128 with it: a 4-byte header
		content(4, 4000),
		content(5, 5000),
		bytes.Repeat([]byte("compressible "), 1000),
		content(6, 300<<10),
	}
}

// writeSummed writes sumBlobs with Checksum (and c) and returns the path,
// the offsets and the file's size.
func writeSummed(t *testing.T, c blobio.Compression) (string, []int64, int64) {
	t.Helper()
	path := filepath.Join(testenv.Dir(t), "summed.blob")
	w, err := blobio.Create(path, &blobio.Options{Checksum: true, Compression: c})
	require.NoError(t, err)
	var offs []int64
	for _, b := range sumBlobs() {
		off, err := w.WriteBlob(b)
		require.NoError(t, err)
		offs = append(offs, off)
	}
	size := w.Size()
	require.NoError(t, w.Close())
	return path, offs, size
}

// readAllWays reads every blob at offs through ReadBlob, ReadBlobs and a
// Scanner, requiring the three to agree, and returns ReadBlob's.
func readAllWays(t *testing.T, r *blobio.Reader, offs []int64) [][]byte {
	t.Helper()
	var got [][]byte
	for _, off := range offs {
		b, err := r.ReadBlob(off, nil)
		require.NoError(t, err, "ReadBlob at %d", off)
		got = append(got, b)
	}
	require.NoError(t, r.ReadBlobs(offs, func(i int, blob []byte) error {
		assert.True(t, bytes.Equal(got[i], blob), "ReadBlobs at %d", offs[i])
		return nil
	}))
	s := blobio.NewScanner(r)
	i := 0
	for ; s.Scan(); i++ {
		require.Less(t, i, len(offs))
		assert.Equal(t, offs[i], s.Offset())
		assert.True(t, bytes.Equal(got[i], s.Bytes()), "Scanner at %d", s.Offset())
	}
	require.NoError(t, s.Err())
	assert.Equal(t, len(offs), i)
	assert.False(t, s.Torn())
	return got
}

// plainBlobs reads the blobs of the file at path from off up to size as
// a reader that knows nothing of seals does (Neon's): the Scanner over an
// io.ReaderAt, which checks none. blobio.Open refuses such a file
// without Checksum (TestChecksumReadWithout).
func plainBlobs(t *testing.T, path string, off, size int64) ([][]byte, error) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	s := blobio.NewScannerReaderAt(f, off, size)
	defer s.Close()
	var blobs [][]byte
	for s.Scan() {
		blobs = append(blobs, bytes.Clone(s.Bytes()))
	}
	return blobs, s.Err()
}

// TestChecksumRoundTrip: with Checksum every blob reads back as written,
// through ReadBlob, ReadBlobs and the Scanner, compressed or not; and the
// file is still a file of blobs to a reader without the option (Neon's):
// an uncompressed blob is its payload and 4 bytes of CRC, and a zstd one
// still decodes to its payload, the CRC riding in a skippable frame.
func TestChecksumRoundTrip(t *testing.T) {
	for _, c := range []blobio.Compression{blobio.None, blobio.Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			path, offs, size := writeSummed(t, c)
			want := sumBlobs()
			r, err := blobio.Open(path, &blobio.Options{Checksum: true})
			require.NoError(t, err)
			got := readAllWays(t, r, offs)
			require.Len(t, got, len(want))
			for i := range want {
				assert.True(t, bytes.Equal(want[i], got[i]), "blob %d", i)
			}
			require.NoError(t, r.Close())

			plain, err := plainBlobs(t, path, 0, size)
			require.NoError(t, err)
			require.Len(t, plain, len(offs))
			zstdSeen := false
			for i, raw := range plain {
				if bytes.Equal(raw, want[i]) {
					zstdSeen = true // decoded through the skippable frame
					continue
				}
				require.Len(t, raw, len(want[i])+4, "blob %d without the option", i)
				assert.Equal(t, want[i], raw[:len(want[i])])
			}
			assert.Equal(t, c == blobio.Zstd, zstdSeen, "zstd blobs decode to their payload without the option")
		})
	}
}

// flip xors one byte of the file at off.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x10
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// requireCorruptAt requires err to match ErrCorrupt with a *CorruptError
// at off.
func requireCorruptAt(t *testing.T, err error, off int64, msg string) {
	t.Helper()
	require.ErrorIs(t, err, blobio.ErrCorrupt, msg)
	var ce *blobio.CorruptError
	require.ErrorAs(t, err, &ce, msg)
	assert.Equal(t, off, ce.Off, msg)
}

// TestChecksumFlippedByte: a payload byte flipped in the middle of the
// file is ErrCorrupt at the blob's offset from ReadBlob, ReadBlobs and the
// Scanner, bounded or not (blobs follow it, so it is no torn tail), and
// never data. Without the option the same file hands the byte back.
func TestChecksumFlippedByte(t *testing.T) {
	for _, c := range []blobio.Compression{blobio.None, blobio.Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			path, offs, size := writeSummed(t, c)
			const k = 5 // content(4, 4000): 4-byte header
			flip(t, path, (offs[k]+offs[k+1])/2)
			for _, o := range []*blobio.Options{{Checksum: true}, {Checksum: true, Size: size}} {
				r, err := blobio.Open(path, o)
				require.NoError(t, err)
				_, err = r.ReadBlob(offs[k], nil)
				requireCorruptAt(t, err, offs[k], "ReadBlob")
				assert.Contains(t, err.Error(), "checksum mismatch")
				_, err = r.ReadBlob(offs[k-1], nil)
				require.NoError(t, err, "its neighbour")

				err = r.ReadBlobs(offs, func(i int, blob []byte) error {
					assert.NotEqual(t, k, i, "the corrupt blob was delivered")
					return nil
				})
				requireCorruptAt(t, err, offs[k], "ReadBlobs")

				s := blobio.NewScanner(r)
				n := 0
				for s.Scan() {
					n++
				}
				assert.Equal(t, k, n)
				requireCorruptAt(t, s.Err(), offs[k], "Scanner")
				assert.False(t, s.Torn())
				require.NoError(t, r.Close())
			}

			if c == blobio.None {
				plain, err := plainBlobs(t, path, offs[k], offs[k+1])
				require.NoError(t, err, "without checksums the format cannot tell")
				require.Len(t, plain, 1)
				assert.NotEqual(t, sumBlobs()[k], plain[0][:len(plain[0])-4])
			}
		})
	}
}

// TestChecksumHeader: a header whose compression bits flipped (0x80 into
// 0x90) and a ReadBlob at an offset inside a record, whose "header" is a
// payload byte, are ErrCorrupt; without the option the second returns
// bytes as a blob (issue 24: ReadBlob(3) returned 108 bytes and nil).
func TestChecksumHeader(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "inside.blob")
	w, err := blobio.Create(path, &blobio.Options{Checksum: true})
	require.NoError(t, err)
	a := bytes.Repeat([]byte{'a'}, 200) // 'a' (97) read as a 1-byte header: 97 bytes follow
	first, err := w.WriteBlob(a)
	require.NoError(t, err)
	second, err := w.WriteBlob(content(7, 300))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Equal(t, int64(0), first)

	plain, err := plainBlobs(t, path, 5, 5+1+97)
	require.NoError(t, err, "without checksums a payload byte is a header")
	require.Len(t, plain, 1)
	assert.Len(t, plain[0], 97)

	r, err := blobio.Open(path, &blobio.Options{Checksum: true})
	require.NoError(t, err)
	_, err = r.ReadBlob(5, nil)
	requireCorruptAt(t, err, 5, "ReadBlob inside a record")
	err = r.ReadBlobs([]int64{first, 5}, func(int, []byte) error { return nil })
	requireCorruptAt(t, err, 5, "ReadBlobs inside a record")
	require.NoError(t, r.Close())

	flip(t, path, second) // 0x80 → 0x90: the blob now claims zstd
	r, err = blobio.Open(path, &blobio.Options{Checksum: true})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.ReadBlob(second, nil)
	requireCorruptAt(t, err, second, "compression bits")
	assert.Contains(t, err.Error(), "checksum")
}

// TestChecksumTornTail: a crash that tore the last blob (its last sectors
// never written, zeros grown ahead after it), or cut the file inside it,
// ends a checksummed scan without Options.Size at that blob, with Err() ==
// nil, Torn() and End() at its offset, where OpenAppend goes on; with
// Options.Size covering it, the same blob is ErrCorrupt.
func TestChecksumTornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(t *testing.T, path string, last, size int64)
	}{
		{"zeroed-then-zeros", func(t *testing.T, path string, last, size int64) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			defer f.Close()
			_, err = f.WriteAt(make([]byte, size-last-10), last+10) // the blob's tail never written
			require.NoError(t, err)
			require.NoError(t, f.Truncate(size+1<<20)) // grown ahead
		}},
		{"cut", func(t *testing.T, path string, last, size int64) {
			require.NoError(t, os.Truncate(path, last+(size-last)/2))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(testenv.Dir(t), "torn.blob")
			w, err := blobio.Create(path, &blobio.Options{Checksum: true})
			require.NoError(t, err)
			var want []string
			for i := range 50 {
				v := content(i, 100+i*97)
				_, err := w.WriteBlob(v)
				require.NoError(t, err)
				want = append(want, string(v))
			}
			require.NoError(t, w.Sync())
			synced := w.Synced()
			last, err := w.WriteBlob(content(99, 3000))
			require.NoError(t, err)
			size := w.Size()
			require.NoError(t, w.Close())
			require.Equal(t, synced, last)
			tc.tear(t, path, last, size)

			requireTornAt(t, path, &blobio.Options{Checksum: true}, want, last)

			// Without checksums the zeroed blob comes back as data.
			if tc.name == "zeroed-then-zeros" {
				blobs, err := plainBlobs(t, path, 0, size)
				require.NoError(t, err)
				assert.Len(t, blobs, len(want)+1, "the torn blob read back as a blob")

				r, err := blobio.Open(path, &blobio.Options{Checksum: true, Size: size})
				require.NoError(t, err)
				s := blobio.NewScanner(r)
				for s.Scan() {
				}
				requireCorruptAt(t, s.Err(), last, "bounded: a mismatch is an error")
				require.NoError(t, r.Close())
			}

			appendAfterTorn(t, path, &blobio.Options{Checksum: true}, want, last) // recovery goes on from End
		})
	}
}

// TestChecksumLostSector: a sector zeroed in the middle of the file (a
// lost write), with blobs after it, is corruption the Scanner reports, not
// a torn tail it ends at quietly, even where the zeros cover the next
// header.
func TestChecksumLostSector(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "lost.blob")
	w, err := blobio.Create(path, &blobio.Options{Checksum: true})
	require.NoError(t, err)
	var offs []int64
	for i := range 100 {
		off, err := w.WriteBlob(content(i, 1000))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	require.NoError(t, w.Close())
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	// 4 KiB of zeros from the middle of blob 20, over the next headers.
	_, err = f.WriteAt(make([]byte, 4096), offs[20]+500)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r, err := blobio.Open(path, &blobio.Options{Checksum: true})
	require.NoError(t, err)
	defer r.Close()
	s := blobio.NewScanner(r)
	n := 0
	for s.Scan() {
		n++
	}
	assert.Equal(t, 20, n)
	requireCorruptAt(t, s.Err(), offs[20], "a lost sector mid-file")
	assert.False(t, s.Torn())
}

// TestChecksumLog: a Log over a checksummed Writer writes sealed blobs
// from many goroutines.
func TestChecksumLog(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "log.blob")
	w, err := blobio.Create(path, &blobio.Options{Checksum: true})
	require.NoError(t, err)
	l := blobio.NewLog(w)
	var wg sync.WaitGroup
	var mu sync.Mutex
	offs := map[int64][]byte{}
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				v := content(g*100+i, 50+i*30)
				off, err := l.Append(v)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				offs[off] = v
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(t, l.Close())
	r, err := blobio.Open(path, &blobio.Options{Checksum: true})
	require.NoError(t, err)
	defer r.Close()
	s := blobio.NewScanner(r)
	n := 0
	for ; s.Scan(); n++ {
		assert.Equal(t, offs[s.Offset()], s.Bytes())
	}
	require.NoError(t, s.Err())
	assert.Equal(t, len(offs), n)
}

// TestChecksumTooLarge: the seal counts against MaxBlobSize.
func TestChecksumTooLarge(t *testing.T) {
	w, err := blobio.Create(filepath.Join(testenv.Dir(t), "large.blob"), &blobio.Options{Checksum: true})
	require.NoError(t, err)
	defer w.Close()
	_, err = w.WriteBlob(make([]byte, blobio.MaxBlobSize-3))
	assert.ErrorIs(t, err, blobio.ErrBlobTooLarge)
	_, err = w.WriteBlob([]byte("still usable"))
	assert.NoError(t, err)
}

// fuzzSummed reads data as a checksummed file: errors are fine, panics
// are not, and whatever the Scanner returns ReadBlob returns too.
func fuzzSummed(t *testing.T, path string, data []byte, size int64) {
	r, err := blobio.Open(path, &blobio.Options{Checksum: true, BufferSize: 4096, Size: size})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var offs []int64
	for off := int64(0); off < min(int64(len(data)), 8); off++ {
		if _, err := r.ReadBlob(off, nil); err != nil && !errors.Is(err, blobio.ErrCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, blobio.ErrOffset) {
			t.Fatalf("ReadBlob at %d: %v", off, err)
		}
		offs = append(offs, off)
	}
	_ = r.ReadBlobs(offs, func(i int, blob []byte) error { return nil })
	s := blobio.NewScanner(r)
	for n := 0; s.Scan(); n++ {
		if n > len(data) {
			t.Fatal("more blobs than bytes")
		}
		got, err := r.ReadBlob(s.Offset(), nil)
		if err != nil || string(got) != string(s.Bytes()) {
			t.Fatalf("blob at %d: Scanner and ReadBlob disagree (%v)", s.Offset(), err)
		}
	}
}

// TestChecksumTornOutOfOrder: a crash tore the writes in flight after the
// last Sync, and their sectors landed out of order: some blobs past
// Synced are whole, a stretch of sectors in their middle never came (so
// the first blob there fails its seal), later sectors of the same writes
// did, and zeros follow (grown ahead, or the end of a write the crash cut
// short). A checksummed Scanner without Options.Size ends quietly at the
// first blob that fails, Torn, with every blob before it, acknowledged or
// not, and End there; with the recorded Size it returns the acknowledged
// blobs and no error. Issue 32's crash states found it stopping with
// ErrCorrupt instead, data following within 64 KiB.
func TestChecksumTornOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(path string, size int64) error // what follows the writes in flight
	}{
		{"grown-ahead", func(path string, size int64) error { return os.Truncate(path, size+2<<20) }},
		{"last-sector-lost", func(path string, size int64) error {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt(make([]byte, 4096), size-4096)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(testenv.Dir(t), "torn.blob")
			w, err := blobio.Create(path, &blobio.Options{Checksum: true})
			require.NoError(t, err)
			var want []string
			var offs []int64
			write := func(i int) {
				v := content(i, 100+i*37%3000)
				off, err := w.WriteBlob(v)
				require.NoError(t, err)
				want, offs = append(want, string(v)), append(offs, off)
			}
			for i := range 50 {
				write(i)
			}
			require.NoError(t, w.Sync())
			synced, acked := w.Synced(), len(want)
			for i := 50; i < 150; i++ { // unacknowledged: about 150 KiB in flight
				write(i)
			}
			size := w.Size()
			require.NoError(t, w.Close())

			// The sectors from the middle of blob 80 to that of blob 90
			// never landed; those after them did.
			lost, upto := offs[80]+50, offs[90]+50
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(make([]byte, upto-lost), lost)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.NoError(t, tc.after(path, size))

			r, err := blobio.Open(path, &blobio.Options{Checksum: true})
			require.NoError(t, err)
			offsGot, blobs, err := scanAll(t, r)
			require.NoError(t, err, "a torn tail, not corruption")
			assert.Equal(t, want[:80], blobs, "every blob before the first torn one")
			assert.Equal(t, offs[:80], offsGot)
			s := blobio.NewScanner(r)
			for s.Scan() {
			}
			assert.True(t, s.Torn())
			assert.Equal(t, offs[80], s.End(), "where OpenAppend goes on")
			require.NoError(t, r.Close())

			r, err = blobio.Open(path, &blobio.Options{Checksum: true, Size: synced})
			require.NoError(t, err)
			defer r.Close()
			_, blobs, err = scanAll(t, r)
			require.NoError(t, err)
			assert.Equal(t, want[:acked], blobs, "the acknowledged blobs, by the recorded size")
		})
	}
}

// TestTornTailCutPlain is the crash state crashtest's TestBlobio found on
// ext4 and xfs: the Writer had grown the file to 1 MiB, a blob's header
// landed just below that end, and the growth that would have covered its
// payload did not survive. A scan without Options.Size and without
// checksums ends at that blob as a torn tail (Err nil, Torn, End at the
// blob), not with io.ErrUnexpectedEOF, and the log goes on from End.
func TestTornTailCutPlain(t *testing.T) {
	const cut = 1 << 20
	path := filepath.Join(testenv.Dir(t), "cut.blob")
	w, err := blobio.Create(path, nil)
	require.NoError(t, err)
	var want []string
	for i := 0; w.Size()+2*10000 < cut; i++ {
		v := content(i, 10000)
		_, err := w.WriteBlob(v)
		require.NoError(t, err)
		want = append(want, string(v))
	}
	require.NoError(t, w.Sync())
	last, err := w.WriteBlob(content(-1, 20000))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Less(t, last, int64(cut))
	require.Greater(t, last+20000, int64(cut))
	require.NoError(t, os.Truncate(path, cut))

	requireTornAt(t, path, nil, want, last)
	appendAfterTorn(t, path, nil, want, last)
}

// requireTornAt scans the file at path without Options.Size and requires
// the blobs want, then a torn tail at last.
func requireTornAt(t *testing.T, path string, o *blobio.Options, want []string, last int64) {
	t.Helper()
	r, err := blobio.Open(path, o)
	require.NoError(t, err)
	defer r.Close()
	s := blobio.NewScanner(r)
	var got []string
	for s.Scan() {
		got = append(got, string(s.Bytes()))
	}
	require.NoError(t, s.Err())
	assert.Equal(t, want, got)
	assert.True(t, s.Torn())
	assert.Equal(t, last, s.End())
}

// appendAfterTorn goes on writing from the torn tail at last, as a
// recovery does, and requires the blobs want and then the new one.
func appendAfterTorn(t *testing.T, path string, o *blobio.Options, want []string, last int64) {
	t.Helper()
	w, err := blobio.OpenAppend(path, last, o)
	require.NoError(t, err)
	_, err = w.WriteBlob([]byte("after"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	r, err := blobio.Open(path, o)
	require.NoError(t, err)
	defer r.Close()
	_, blobs, err := scanAll(t, r)
	require.NoError(t, err)
	assert.Equal(t, append(want, "after"), blobs)
}
