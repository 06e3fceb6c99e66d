package blobio_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// scanAll scans r and returns the blobs' offsets and contents.
func scanAll(t *testing.T, r *blobio.Reader) ([]int64, []string, error) {
	t.Helper()
	var offs []int64
	var blobs []string
	s := blobio.NewScanner(r)
	for s.Scan() {
		offs, blobs = append(offs, s.Offset()), append(blobs, string(s.Bytes()))
	}
	return offs, blobs, s.Err()
}

func writeFile(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(testenv.Dir(t), fmt.Sprintf("f%d.blob", rand.Uint64()))
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// TestScanEmptyLastBlob: a file whose last blob is empty scans to its end
// with no error (issue 12, item 3: the Scanner asked for the empty payload's
// bytes past the end of the file and failed with io.ErrUnexpectedEOF).
func TestScanEmptyLastBlob(t *testing.T) {
	hello := append([]byte{5}, "hello"...)
	for _, c := range []struct {
		name string
		data []byte
		o    *blobio.Options
		want []string
	}{
		{"long header", append(hello, 0x80, 0, 0, 0), nil, []string{"hello", ""}},
		{"short header, bounded", append(hello, 0), &blobio.Options{Size: 7}, []string{"hello", ""}},
		{"empty zstd", append(hello, 0x90, 0, 0, 0), nil, []string{"hello", ""}},
		{"only empty", []byte{0x80, 0, 0, 0, 0x80, 0, 0, 0}, nil, []string{"", ""}},
	} {
		r, err := blobio.Open(writeFile(t, c.data), c.o)
		require.NoError(t, err)
		offs, blobs, err := scanAll(t, r)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, blobs, c.name)
		for i, off := range offs {
			got, err := r.ReadBlob(off, nil)
			require.NoError(t, err)
			assert.Equal(t, c.want[i], string(got))
		}
		require.NoError(t, r.Close())
	}
}

// TestCrashedTail is the reader's half of the crash contract: zeros after
// the written blobs (a file grown ahead of its data, as a crash leaves it)
// end an unbounded scan, quickly and without error, instead of reading back
// as empty blobs; Options.Size bounds the Reader explicitly.
func TestCrashedTail(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "crashed.blob")
	w, err := blobio.Create(path, nil)
	require.NoError(t, err)
	var want []string
	for i := range 300 {
		v := content(i, 1+i*13%5000)
		_, err := w.WriteBlob(v)
		require.NoError(t, err)
		want = append(want, string(v))
	}
	size := w.Size()
	require.NoError(t, w.Close())
	const tail = 64 << 20 // a growth step the appender may have taken
	require.NoError(t, os.Truncate(path, size+tail))

	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	assert.Equal(t, size+tail, r.Size(), "unbounded: the file's size")
	start := time.Now()
	_, blobs, err := scanAll(t, r)
	require.NoError(t, err)
	assert.Equal(t, want, blobs, "zeros read back as blobs")
	assert.Less(t, time.Since(start), 5*time.Second, "the scan read the zeros")
	got, err := r.ReadBlob(size+100, nil)
	require.NoError(t, err, "a 0x00 asked for explicitly is an empty blob")
	assert.Empty(t, got)
	require.NoError(t, r.Close())

	// Bounded by the written size: the same blobs.
	r, err = blobio.Open(path, &blobio.Options{Size: size})
	require.NoError(t, err)
	assert.Equal(t, size, r.Size())
	_, blobs, err = scanAll(t, r)
	require.NoError(t, err)
	assert.Equal(t, want, blobs)
	_, err = r.ReadBlob(size, nil)
	assert.ErrorIs(t, err, blobio.ErrOffset, "at the bound")
	require.NoError(t, r.Close())

	// Bounded past it: up to the bound, 0x00 being an empty blob there.
	r, err = blobio.Open(path, &blobio.Options{Size: size + 10})
	require.NoError(t, err)
	offs, blobs, err := scanAll(t, r)
	require.NoError(t, err)
	require.Len(t, blobs, len(want)+10)
	assert.Equal(t, want, blobs[:len(want)])
	assert.Equal(t, size+9, offs[len(offs)-1])
	require.NoError(t, r.Close())

	// A bound that cuts the last blob: it runs past the end.
	r, err = blobio.Open(path, &blobio.Options{Size: size - 1})
	require.NoError(t, err)
	offs, _, err = scanAll(t, r)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Len(t, offs, len(want)-1)
	require.NoError(t, r.Close())
	last := size - int64(len(want[len(want)-1])) - int64(blobio.HeaderSize(len(want[len(want)-1]), blobio.None))
	r, err = blobio.Open(path, &blobio.Options{Size: size - 1})
	require.NoError(t, err)
	_, err = r.ReadBlob(last, nil)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	err = r.ReadBlobs([]int64{0, last}, func(int, []byte) error { return nil })
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.NoError(t, r.Close())

	// A bound past the file's end: bytes the caller counted on are gone.
	_, err = blobio.Open(path, &blobio.Options{Size: size + tail + 1})
	assert.ErrorIs(t, err, blobio.ErrInvalidOptions)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = blobio.Open(path, &blobio.Options{Size: -1})
	assert.ErrorIs(t, err, blobio.ErrInvalidOptions)
}

// zstdFrame builds a zstd frame by hand: fcs < 0 leaves the content size
// out; blocks are appended as given.
func zstdFrame(fcs int64, blocks ...[]byte) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd}
	if fcs < 0 {
		f = append(f, 0x00, (17-10)<<3) // no FCS, a 128 KiB window
	} else {
		f = append(f, 2<<6|1<<5) // single segment, a 4-byte FCS
		f = binary.LittleEndian.AppendUint32(f, uint32(fcs))
	}
	for _, b := range blocks {
		f = append(f, b...)
	}
	return f
}

// zstdBlock builds a block: typ 0 raw, 1 RLE, 2 compressed.
func zstdBlock(last bool, typ, size int, data []byte) []byte {
	h := uint32(size)<<3 | uint32(typ)<<1
	if last {
		h |= 1
	}
	return append([]byte{byte(h), byte(h >> 8), byte(h >> 16)}, data...)
}

// zstdBlob frames a zstd payload as one blob.
func zstdBlob(payload []byte) []byte {
	b, err := blobio.AppendHeader(nil, len(payload), blobio.Zstd)
	if err != nil {
		panic(err)
	}
	return append(b, payload...)
}

// allocated returns the bytes f allocates on the Go heap.
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestZstdBombs: hostile zstd blobs never decode past MaxBlobSize, and a
// frame header's claim is never what memory is allocated by (issue 12,
// item 4: a small blob decoded to 600 MiB; a 4 KiB one claiming 512 MiB
// allocated 128 MiB before it failed).
func TestZstdBombs(t *testing.T) {
	const rleBlock = 128 << 10
	var rle [][]byte
	for i := range 600 << 20 / rleBlock { // 600 MiB in 19 KB
		rle = append(rle, zstdBlock(i == 600<<20/rleBlock-1, 1, rleBlock, []byte{'a'}))
	}
	garbage := make([]byte, 4000)
	rand.NewChaCha8([32]byte{1}).Read(garbage)
	lying := func(fcs int64) []byte { return zstdFrame(fcs, zstdBlock(true, 2, len(garbage), garbage)) }
	// Compressed blocks that decode to nothing (no literals, no
	// sequences): 5 bytes each, and each counts as 128 KiB in the bound.
	empty := func(n int) [][]byte {
		var blocks [][]byte
		for i := range n {
			blocks = append(blocks, zstdBlock(i == n-1, 2, 2, []byte{0, 0}))
		}
		return blocks
	}

	// 300 MiB of zeros, streamed (no content size): made with -update.
	const bombFile = "testdata/zeros-300MiB.zst"
	if *update {
		var b bytes.Buffer
		enc, err := zstd.NewWriter(&b, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		require.NoError(t, err)
		zeros := make([]byte, 1<<20)
		for range 300 {
			_, err := enc.Write(zeros)
			require.NoError(t, err)
		}
		require.NoError(t, enc.Close())
		require.NoError(t, os.WriteFile(bombFile, b.Bytes(), 0o644))
	}
	compressed, err := os.ReadFile(bombFile)
	require.NoError(t, err)

	for _, c := range []struct {
		name     string
		payload  []byte
		maxAlloc uint64
	}{
		{"RLE blocks to 600 MiB", zstdFrame(-1, rle...), 1 << 20},
		{"claims 0x1ffff000 in 4 KiB", lying(0x1ffff000), 1 << 20},
		{"claims 0x0ffff000 in 4 KiB", lying(0x0ffff000), 1 << 20},
		{"claims 1 MiB in 4 KiB", lying(1 << 20), 1 << 20},
		// Within what its blocks could hold, so only decoding tells.
		{"claims 96 MiB in 4 KiB of empty blocks", zstdFrame(96<<20, empty(800)...), 1 << 20},
		// A real frame must be decoded to find out: at most MaxBlobSize.
		{"compressed to 300 MiB", compressed, blobio.MaxBlobSize + 16<<20},
	} {
		r, err := blobio.Open(writeFile(t, zstdBlob(c.payload)), nil)
		require.NoError(t, err)
		var got []byte
		n := allocated(func() { got, err = r.ReadBlob(0, nil) })
		assert.ErrorIs(t, err, blobio.ErrCorrupt, c.name)
		assert.Zero(t, len(got), "%s: bytes returned", c.name)
		assert.LessOrEqual(t, n, c.maxAlloc, "%s: allocated %d bytes", c.name, n)
		_, _, err = scanAll(t, r)
		assert.ErrorIs(t, err, blobio.ErrCorrupt, "%s: Scanner", c.name)
		require.NoError(t, r.Close())
	}

	// Valid, but decoding to nothing: 10 KiB of empty blocks, whose bound
	// is MaxBlobSize, cost what they decode to, not their bound.
	r, err := blobio.Open(writeFile(t, zstdBlob(zstdFrame(-1, empty(2100)...))), nil)
	require.NoError(t, err)
	var got []byte
	n := allocated(func() { got, err = r.ReadBlob(0, nil) })
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.LessOrEqual(t, n, uint64(1<<20), "empty blocks: allocated %d bytes", n)
	require.NoError(t, r.Close())

	// What a streaming encoder writes (no content size, as Neon's) and
	// hand-made raw and RLE frames still decode, to the byte; so do frames
	// whose content size is past the first room decode gives a blob, one
	// or two, single-segment or not, with a checksum.
	var stream bytes.Buffer
	enc, err := zstd.NewWriter(&stream)
	require.NoError(t, err)
	text := bytes.Repeat([]byte("neon pageserver "), 20000)
	big := bytes.Repeat(text, 7) // 2.1 MiB, in a few KiB
	_, err = enc.Write(text)
	require.NoError(t, err)
	require.NoError(t, enc.Close())
	for _, c := range []struct {
		name    string
		payload []byte
		want    []byte
	}{
		{"stream", stream.Bytes(), text},
		{"raw+RLE", zstdFrame(-1, zstdBlock(false, 0, 3, []byte("abc")), zstdBlock(true, 1, 5, []byte{'z'})), []byte("abczzzzz")},
		{"raw+RLE with FCS", zstdFrame(8, zstdBlock(false, 0, 3, []byte("abc")), zstdBlock(true, 1, 5, []byte{'z'})), []byte("abczzzzz")},
		{"two frames", append(zstdFrame(1, zstdBlock(true, 0, 1, []byte("a"))), zstdFrame(-1, zstdBlock(true, 0, 1, []byte("b")))...), []byte("ab")},
		{"EncodeAll, single segment", encodeAll(t, big, zstd.WithSingleSegment(true)), big},
		{"EncodeAll, windowed", encodeAll(t, big, zstd.WithSingleSegment(false), zstd.WithWindowSize(1<<20)), big},
		{"EncodeAll, checksum", encodeAll(t, big, zstd.WithEncoderCRC(true), zstd.WithSingleSegment(true)), big},
		{"small then large frame", append(encodeAll(t, text[:1000]), encodeAll(t, big, zstd.WithSingleSegment(true))...), append(append([]byte{}, text[:1000]...), big...)},
	} {
		r, err := blobio.Open(writeFile(t, zstdBlob(c.payload)), nil)
		require.NoError(t, err)
		got, err := r.ReadBlob(0, nil)
		require.NoError(t, err, c.name)
		assert.True(t, bytes.Equal(c.want, got), c.name)
		require.NoError(t, r.Close())
	}
}

// TestZstdLargeBlobs: blobs the Writer compressed far past the room a
// blob is first decoded into (16 times its stored size) read back whole
// through ReadBlob, ReadBlobs and the Scanner: decoding again into the
// bound once the first room ran out.
func TestZstdLargeBlobs(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "large.blob")
	w, err := blobio.Create(path, &blobio.Options{Compression: blobio.Zstd})
	require.NoError(t, err)
	var want [][]byte
	var offs []int64
	for i, n := range []int{100 << 10, 1 << 20, 3 << 20, 24 << 20} {
		v := bytes.Repeat(content(i, 4096), n/4096)
		off, err := w.WriteBlob(v)
		require.NoError(t, err)
		want, offs = append(want, v), append(offs, off)
	}
	require.NoError(t, w.Close())
	require.Less(t, w.Size(), int64(1<<20), "the blobs were stored compressed")

	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	for i, off := range offs {
		// Into room of its own and into a dst whose capacity ends inside
		// a block, where the decoder fails in words of its own.
		for _, dst := range [][]byte{nil, make([]byte, 0, 300<<10)} {
			got, err := r.ReadBlob(off, dst)
			require.NoError(t, err, "blob %d, dst of %d", i, cap(dst))
			assert.True(t, bytes.Equal(want[i], got), "ReadBlob %d, dst of %d", i, cap(dst))
		}
	}
	require.NoError(t, r.ReadBlobs(offs, func(i int, got []byte) error {
		assert.True(t, bytes.Equal(want[i], got), "ReadBlobs %d", i)
		return nil
	}))
	s := blobio.NewScanner(r)
	n := 0
	for ; s.Scan(); n++ {
		assert.True(t, bytes.Equal(want[n], s.Bytes()), "Scanner %d", n)
	}
	require.NoError(t, s.Err())
	assert.Equal(t, len(want), n)
}

// encodeAll compresses p into one frame, with its content size.
func encodeAll(t *testing.T, p []byte, o ...zstd.EOption) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, o...)
	require.NoError(t, err)
	defer enc.Close()
	return enc.EncodeAll(p, nil)
}

// randomFile writes n blobs of random sizes (some empty, some longer than a
// merged read, some compressible) and returns them and their offsets.
func randomFile(t *testing.T, seed uint64, n int, comp blobio.Compression) (string, [][]byte, []int64) {
	t.Helper()
	path := filepath.Join(testenv.Dir(t), fmt.Sprintf("random-%d.blob", seed))
	w, err := blobio.Create(path, &blobio.Options{Compression: comp})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(seed, 1))
	var blobs [][]byte
	var offs []int64
	for i := range n {
		var v []byte
		switch rng.IntN(20) {
		case 0:
			v = content(i, 0)
		case 1:
			v = content(i, blobio.MergeSize+rng.IntN(200<<10)) // longer than a read
		case 2:
			v = bytes.Repeat([]byte{byte(i)}, 1000+rng.IntN(20000)) // compressible
		case 3, 4:
			v = content(i, 4000+rng.IntN(9000))
		default:
			v = content(i, rng.IntN(300))
		}
		off, err := w.WriteBlob(v)
		require.NoError(t, err)
		blobs, offs = append(blobs, v), append(offs, off)
	}
	require.NoError(t, w.Close())
	return path, blobs, offs
}

// TestReadBlobsMatchesReadBlob reads random batches of a random file, in
// any order and with duplicates, and compares every blob with ReadBlob's.
func TestReadBlobsMatchesReadBlob(t *testing.T) {
	for _, p := range testenv.Policies() {
		for _, comp := range []blobio.Compression{blobio.None, blobio.Zstd} {
			t.Run(fmt.Sprintf("%v/%v", p, comp), func(t *testing.T) {
				path, blobs, offs := randomFile(t, uint64(p)*10+uint64(comp), 400, comp)
				r, err := blobio.Open(path, &blobio.Options{IO: p})
				require.NoError(t, err)
				defer r.Close()
				rng := rand.New(rand.NewPCG(uint64(p), 2))
				for round := range 16 {
					var batch []int64
					var want []int
					n := 1 + rng.IntN(200)
					start := rng.IntN(len(offs))
					for range n {
						k := rng.IntN(len(offs))
						if round%2 == 0 { // neighbours, to merge
							k = (start + rng.IntN(40)) % len(offs)
						}
						batch, want = append(batch, offs[k]), append(want, k)
					}
					calls := make([]int, n)
					err := r.ReadBlobs(batch, func(i int, blob []byte) error {
						calls[i]++
						single, err := r.ReadBlob(batch[i], nil)
						require.NoError(t, err)
						require.True(t, bytes.Equal(single, blob), "blob %d at %d: ReadBlobs and ReadBlob differ", i, batch[i])
						require.True(t, bytes.Equal(blobs[want[i]], blob), "blob %d at %d differs from what was written", i, batch[i])
						return nil
					})
					require.NoError(t, err)
					for i, c := range calls {
						require.Equal(t, 1, c, "fn called %d times for offset %d", c, i)
					}
				}
			})
		}
	}
}

// opCounter is an Injector that counts the calls of one operation an
// engine is asked for, injecting nothing.
type opCounter struct {
	op direct.Op
	n  atomic.Int64
}

func (c *opCounter) Inject(op direct.Op, off int64, n int) (direct.Fault, bool) {
	if op == c.op {
		c.n.Add(1)
	}
	return direct.Fault{}, false
}

// TestReadBlobsMerges: neighbours come in one read, blobs far apart in
// reads of their own, and a blob longer than its merged read is read in
// full.
func TestReadBlobsMerges(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "m.blob")
	w, err := blobio.Create(path, nil)
	require.NoError(t, err)
	var small, far []int64
	for i := range 200 {
		off, err := w.WriteBlob(content(i, 100))
		require.NoError(t, err)
		small = append(small, off)
	}
	big, err := w.WriteBlob(content(999, 100<<10)) // after small blobs taught the reader they are small
	require.NoError(t, err)
	for i := range 16 {
		off, err := w.WriteBlob(content(i, 100))
		require.NoError(t, err)
		far = append(far, off)
		_, err = w.WriteBlob(content(i, 64<<10)) // a gap
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())

	c := opCounter{op: direct.OpRead}
	r, err := blobio.Open(path, &blobio.Options{Faults: &c})
	require.NoError(t, err)
	defer r.Close()
	for _, off := range small[:20] {
		_, err := r.ReadBlob(off, nil)
		require.NoError(t, err)
	}
	count := func(offs []int64) int64 {
		before := c.n.Load()
		n := 0
		err := r.ReadBlobs(offs, func(i int, blob []byte) error {
			n++
			want, err := r.ReadBlob(offs[i], nil)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, blob))
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, len(offs), n)
		return c.n.Load() - before - int64(len(offs)) // minus fn's ReadBlobs
	}
	assert.LessOrEqual(t, count(small), int64(2), "200 blobs of 101 bytes in a row")
	assert.Equal(t, int64(len(far)), count(far), "blobs 64 KiB apart")
	assert.LessOrEqual(t, count(append(small[190:], big)), int64(2), "a blob longer than its read")
}

// TestReadBlobsErrors: each error names its offset and index, and matches
// its sentinel; fn's error stops the call.
func TestReadBlobsErrors(t *testing.T) {
	data := []byte{1, 'a', 2, 'b', 'c', 0xa0, 0, 0, 1, 'x', 0x80, 0, 1, 0}
	r, err := blobio.Open(writeFile(t, data), nil)
	require.NoError(t, err)
	defer r.Close()
	none := func(int, []byte) error { return nil }
	var be *blobio.BlobError
	for _, c := range []struct {
		offs  []int64
		want  error
		index int
	}{
		{[]int64{0, 2, -1}, blobio.ErrOffset, 2},
		{[]int64{0, int64(len(data))}, blobio.ErrOffset, 1},
		{[]int64{2, 5, 0}, blobio.ErrCorrupt, 1},
		{[]int64{0, 10}, io.ErrUnexpectedEOF, 1},
	} {
		err := r.ReadBlobs(c.offs, none)
		require.ErrorIs(t, err, c.want, "%v", c.offs)
		require.ErrorAs(t, err, &be)
		assert.Equal(t, c.index, be.Index, "%v", c.offs)
		assert.Equal(t, c.offs[c.index], be.Offset)
		assert.Contains(t, err.Error(), fmt.Sprint(c.offs[c.index]))
	}

	stop := errors.New("enough")
	calls := 0
	err = r.ReadBlobs([]int64{0, 2, 0, 2}, func(i int, blob []byte) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 2, calls, "fn called after its error")
	assert.NoError(t, r.ReadBlobs(nil, none))
}

// TestReadFaults: read errors from the engine reach ReadBlob and ReadBlobs
// callers and the Scanner, transient ones are retried away, and nothing
// leaks.
func TestReadFaults(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	path, blobs, offs := randomFile(t, 5, 300, blobio.None)
	for _, p := range testenv.Policies() {
		plan := faults.NewPlan(faults.Fail(direct.OpRead, 5, syscall.EIO))
		r, err := blobio.Open(path, &blobio.Options{IO: p, Faults: plan})
		require.NoError(t, err)
		var failed error
		for i := 0; i < len(offs) && failed == nil; i++ {
			var got []byte
			got, failed = r.ReadBlob(offs[i], nil)
			if failed == nil {
				require.True(t, bytes.Equal(blobs[i], got))
			}
		}
		assert.ErrorIs(t, failed, syscall.EIO, "%v: ReadBlob", p)
		err = r.ReadBlobs(offs, func(int, []byte) error { return nil })
		assert.ErrorIs(t, err, syscall.EIO, "%v: ReadBlobs", p)
		var be *blobio.BlobError
		assert.ErrorAs(t, err, &be)
		_, _, err = scanAll(t, r)
		assert.ErrorIs(t, err, syscall.EIO, "%v: Scanner", p)
		require.NoError(t, r.Close())

		plan = faults.NewPlan(
			faults.Transient(direct.OpRead, 30, syscall.EINTR),
			faults.Short(direct.OpRead, 30, 4096), // a multiple of any alignment: resumable
			faults.Late(direct.OpRead, 5, time.Millisecond),
		)
		r, err = blobio.Open(path, &blobio.Options{IO: p, Faults: plan})
		require.NoError(t, err)
		err = r.ReadBlobs(offs, func(i int, blob []byte) error {
			if !bytes.Equal(blobs[i], blob) {
				return fmt.Errorf("blob %d differs", i)
			}
			return nil
		})
		require.NoError(t, err, "%v", p)
		require.NoError(t, r.Close())
		assert.Positive(t, plan.Injected()["EINTR"], "%v", p)
	}
	testenv.WaitGoroutines(t, goroutines)
}

// TestReadBlobAllocs: a ReadBlob into a dst with room allocates nothing, for
// plain and zstd blobs.
func TestReadBlobAllocs(t *testing.T) {
	if testing.Short() || testenv.Race {
		t.Skip("AllocsPerRun: -short, or -race (make test runs it without)")
	}
	path := filepath.Join(testenv.Dir(t), "a.blob")
	w, err := blobio.Create(path, &blobio.Options{Compression: blobio.Zstd})
	require.NoError(t, err)
	var offs []int64
	for i := range 64 {
		v := content(i, 4000)
		if i%2 == 1 {
			v = bytes.Repeat([]byte{byte(i)}, 4000)
		}
		off, err := w.WriteBlob(v)
		require.NoError(t, err)
		offs = append(offs, off)
	}
	require.NoError(t, w.Close())
	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	for _, c := range []struct {
		name string
		off  int64
	}{{"plain", offs[10]}, {"zstd", offs[11]}} {
		dst := make([]byte, 0, 8192)
		allocs := testing.AllocsPerRun(200, func() {
			var err error
			if dst, err = r.ReadBlob(c.off, dst); err != nil || len(dst) != 4000 {
				t.Fatalf("%d bytes: %v", len(dst), err)
			}
		})
		assert.Zero(t, allocs, "%s: allocations per ReadBlob", c.name)
	}
}

// TestReadBlobsAllocs: a ReadBlobs batch of 64 offsets, merged or not,
// allocates nothing on the io_uring engine once its state is pooled (the
// pwrite engine starts a goroutine per read), and its calls of fn see
// every blob.
func TestReadBlobsAllocs(t *testing.T) {
	if testing.Short() || testenv.Race {
		t.Skip("AllocsPerRun: -short, or -race (make test runs it without)")
	}
	path := filepath.Join(testenv.Dir(t), "a.blob")
	w, err := blobio.Create(path, nil)
	require.NoError(t, err)
	var offs []int64
	for i := range 4096 {
		off, err := w.WriteBlob(content(i, 4000))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	require.NoError(t, w.Close())
	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	if r.Mode().Engine != direct.EngineURing {
		t.Skipf("reads are goroutines on %v", r.Mode())
	}
	for _, c := range []struct {
		name  string
		every int
	}{{"neighbours", 1}, {"apart", 61}} {
		batch := make([]int64, 64)
		for i := range batch {
			batch[i] = offs[(i*c.every)%len(offs)]
		}
		n := 0
		fn := func(i int, blob []byte) error {
			if len(blob) != 4000 {
				return fmt.Errorf("blob %d: %d bytes", i, len(blob))
			}
			n++
			return nil
		}
		allocs := testing.AllocsPerRun(100, func() {
			if err := r.ReadBlobs(batch, fn); err != nil {
				t.Fatal(err)
			}
		})
		assert.Equal(t, 101*len(batch), n, "%s: calls of fn", c.name)
		assert.Zero(t, allocs, "%s: allocations per ReadBlobs", c.name)
	}
}

// TestConcurrentReadsAndClose runs readers (ReadBlob, ReadBlobs and a
// Scanner) on one Reader while another goroutine closes it, over and over
// for a few seconds: every read returns its blob or ErrClosed, nothing
// races (run it under -race), and nothing leaks.
func TestConcurrentReadsAndClose(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	path, blobs, offs := randomFile(t, 7, 400, blobio.Zstd)
	deadline := time.Now().Add(3 * time.Second)
	if testing.Short() {
		deadline = time.Now().Add(300 * time.Millisecond)
	}
	var reads, closed atomic.Int64
	for round := 0; time.Now().Before(deadline); round++ {
		p := testenv.Policies()[round%len(testenv.Policies())]
		r, err := blobio.Open(path, &blobio.Options{IO: p})
		require.NoError(t, err)
		var wg sync.WaitGroup
		for g := range 32 { // past preadReads: ReadBlob joins the queue too
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				var dst []byte
				for {
					var err error
					switch {
					case g == 0:
						_, _, err = scanAllQuiet(r)
					case g%4 == 1:
						batch := []int64{offs[rng.IntN(len(offs))], offs[rng.IntN(len(offs))], offs[rng.IntN(len(offs))]}
						err = r.ReadBlobs(batch, func(i int, blob []byte) error {
							if k := indexOf(offs, batch[i]); !bytes.Equal(blobs[k], blob) {
								return fmt.Errorf("blob %d differs", k)
							}
							return nil
						})
					default:
						k := rng.IntN(len(offs))
						dst, err = r.ReadBlob(offs[k], dst)
						if err == nil && !bytes.Equal(blobs[k], dst) {
							err = fmt.Errorf("blob %d differs", k)
						}
					}
					if errors.Is(err, blobio.ErrClosed) {
						closed.Add(1)
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					reads.Add(1)
				}
			})
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		require.NoError(t, r.Close())
		wg.Wait()
	}
	t.Logf("%d reads, %d ended by Close", reads.Load(), closed.Load())
	testenv.WaitGoroutines(t, goroutines)
}

func scanAllQuiet(r *blobio.Reader) (int, int, error) {
	s := blobio.NewScanner(r)
	n := 0
	for s.Scan() {
		n++
	}
	return n, 0, s.Err()
}

func indexOf(offs []int64, off int64) int {
	for k, o := range offs {
		if o == off {
			return k
		}
	}
	return -1
}
