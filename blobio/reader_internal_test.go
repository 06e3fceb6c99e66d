package blobio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/testenv"
)

// TestScanReadSize: a Scanner reads DefaultScanRead at a time unless the
// caller sets BufferSize, which then rules.
func TestScanReadSize(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "f")
	require.NoError(t, os.WriteFile(path, []byte{1, 'x'}, 0o600))
	for _, c := range []struct {
		o    *Options
		want int
	}{
		{nil, DefaultScanRead},
		{&Options{}, DefaultScanRead},
		{&Options{BufferSize: 8192}, 8192},
		{&Options{BufferSize: 1 << 20}, 1 << 20},
	} {
		r, err := Open(path, c.o)
		require.NoError(t, err)
		assert.Equal(t, c.want, r.scanSize, "%+v", c.o)
		require.NoError(t, r.Close())
	}
}

// TestZstdBound: the block walk bounds what frames decode to, exactly for
// raw and RLE blocks, and refuses frames whose header or blocks claim more
// than they can hold or than MaxBlobSize.
func TestZstdBound(t *testing.T) {
	magic := []byte{0x28, 0xb5, 0x2f, 0xfd}
	frame := func(hdr []byte, blocks ...[]byte) []byte {
		f := append(append([]byte{}, magic...), hdr...)
		for _, b := range blocks {
			f = append(f, b...)
		}
		return f
	}
	block := func(last bool, typ, size int, data ...byte) []byte {
		h := uint32(size)<<3 | uint32(typ)<<1
		if last {
			h |= 1
		}
		return append([]byte{byte(h), byte(h >> 8), byte(h >> 16)}, data...)
	}
	noFCS := []byte{0x00, (17 - 10) << 3}
	fcs := func(n uint32) []byte { return []byte{2<<6 | 1<<5, byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)} }
	withSum := []byte{0x04, (17 - 10) << 3}
	for _, c := range []struct {
		name string
		p    []byte
		want int
		err  bool
	}{
		{"empty", nil, 0, false},
		{"raw", frame(noFCS, block(true, 0, 3, 'a', 'b', 'c')), 3, false},
		{"RLE", frame(noFCS, block(true, 1, 1000, 'z')), 1000, false},
		{"compressed", frame(noFCS, block(false, 2, 2, 0, 0), block(true, 2, 1, 0)), 2 * zstdMaxBlockSize, false},
		{"FCS", frame(fcs(10), block(true, 2, 2, 0, 0)), 10, false},
		{"checksum", frame(withSum, block(true, 0, 1, 'a'), []byte{1, 2, 3, 4}), 1, false},
		{"two frames", append(frame(noFCS, block(true, 0, 1, 'a')), frame(fcs(5), block(true, 1, 5, 'b'))...), 6, false},
		{"skippable", append([]byte{0x50, 0x2a, 0x4d, 0x18, 2, 0, 0, 0, 9, 9}, frame(noFCS, block(true, 0, 1, 'a'))...), 1, false},
		{"not a frame", []byte("garbage"), 0, false}, // left to DecodeAll
		{"FCS beyond the blocks", frame(fcs(zstdMaxBlockSize+1), block(true, 2, 2, 0, 0)), 0, true},
		{"FCS beyond MaxBlobSize", frame(fcs(MaxBlobSize+1), block(true, 2, 2, 0, 0)), 0, true},
		{"truncated block", frame(noFCS, block(true, 0, 10, 'a')), 0, true},
		{"no last block", frame(noFCS, block(false, 0, 1, 'a')), 0, true},
		{"reserved block", frame(noFCS, block(true, 3, 1, 'a')), 0, true},
		{"truncated checksum", frame(withSum, block(true, 0, 1, 'a'), []byte{1}), 0, true},
		{"many compressed", frame(noFCS, append(bytes.Repeat(block(false, 2, 0), 3000), block(true, 2, 0)...)), MaxBlobSize, false},
	} {
		got, err := zstdBound(c.p)
		if c.err {
			assert.ErrorIs(t, err, ErrCorrupt, c.name)
			continue
		}
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
}

// TestStripFCS: a frame stripped of its content size decodes to the same
// bytes, with a window that covers what a single-segment frame claimed.
func TestStripFCS(t *testing.T) {
	for _, w := range []uint64{1, 1 << 10, 1<<10 + 1, 1 << 20, 1<<20 + 1, 0x0e00_0001, MaxBlobSize} {
		wd := windowDescriptor(w)
		window := func(wd byte) uint64 {
			base := uint64(1) << (10 + wd>>3)
			return base + base/8*uint64(wd&7)
		}
		assert.GreaterOrEqual(t, window(wd), w, "window descriptor %#x for %d", wd, w)
		if wd > 0 {
			assert.Less(t, window(wd-1), w, "window descriptor %#x for %d is not the least", wd, w)
		}
		assert.LessOrEqual(t, window(wd), uint64(zstdMaxWindow), "past the decoder's window limit")
	}

	text := bytes.Repeat([]byte("pageserver blob "), 50_000)
	dec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer dec.Close()
	for _, o := range [][]zstd.EOption{
		{zstd.WithSingleSegment(true)},
		{zstd.WithSingleSegment(false), zstd.WithWindowSize(1 << 20)},
		{zstd.WithSingleSegment(true), zstd.WithEncoderCRC(true)},
	} {
		enc, err := zstd.NewWriter(nil, o...)
		require.NoError(t, err)
		frame := enc.EncodeAll(text, nil)
		require.NoError(t, enc.Close())
		frames, rest, _, err := zstdWalk(frame, nil)
		require.NoError(t, err)
		require.Len(t, frames, 1)
		require.Empty(t, rest)
		require.Equal(t, int64(len(text)), frames[0].fcs)
		stripped := stripFCS(frame, frames[0])
		var h zstd.Header
		_, err = h.DecodeAndStrip(stripped)
		require.NoError(t, err)
		assert.False(t, h.HasFCS)
		assert.False(t, h.SingleSegment)
		assert.GreaterOrEqual(t, h.WindowSize, uint64(len(text)))
		got, err := dec.DecodeAll(stripped, nil)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(text, got))
	}
}

// FuzzZstdDecode holds decode to klauspost's own DecodeAll, with the same
// window limit and no capacity limit, up to MaxBlobSize: whatever one decodes the other decodes to the same bytes,
// whatever room decode starts from and whatever content sizes it left out
// of frame headers on the way.
func FuzzZstdDecode(f *testing.F) {
	text := bytes.Repeat([]byte("pageserver blob "), 40_000)
	for _, o := range [][]zstd.EOption{
		{zstd.WithSingleSegment(true)},
		{zstd.WithSingleSegment(false), zstd.WithWindowSize(1 << 20)},
		{zstd.WithSingleSegment(true), zstd.WithEncoderCRC(true)},
	} {
		enc, err := zstd.NewWriter(nil, o...)
		require.NoError(f, err)
		f.Add(enc.EncodeAll(text, nil), 0)
		f.Add(append(enc.EncodeAll(text[:300], nil), enc.EncodeAll(text, nil)...), 300<<10)
		require.NoError(f, enc.Close())
	}
	empty := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0, 0, 0, 6} // claims 96 MiB
	for i := range 800 {
		h := uint32(2)<<1 | 2<<3
		if i == 799 {
			h |= 1
		}
		empty = append(empty, byte(h), byte(h>>8), byte(h>>16), 0, 0)
	}
	f.Add(empty, 0)
	ref, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(zstdMaxWindow), zstd.WithDecoderMaxWindow(zstdMaxWindow))
	require.NoError(f, err)
	defer ref.Close()
	var p decoderPool
	defer p.close()
	f.Fuzz(func(t *testing.T, payload []byte, dstCap int) {
		dstCap = min(max(dstCap, 0), 8<<20)
		got, err := p.decode(payload, Zstd, make([]byte, 0, dstCap))
		want, werr := ref.DecodeAll(payload, nil)
		if werr == nil && len(want) > MaxBlobSize {
			werr = ErrBlobTooLarge // over what decode ever gives
		}
		switch {
		case err == nil && werr != nil:
			t.Fatalf("decode gave %d bytes where DecodeAll failed: %v", len(got), werr)
		case err != nil && werr == nil:
			t.Fatalf("decode failed where DecodeAll gave %d bytes: %v", len(want), err)
		case err == nil && !bytes.Equal(got, want):
			t.Fatalf("decode gave %d bytes, DecodeAll %d", len(got), len(want))
		}
	})
}

// TestPlanMerges: ReadBlobs' plan merges neighbours into reads no longer
// than a buffer, keeps blobs far apart in reads of their own, and serves
// every offset, duplicates included, exactly once.
func TestPlanMerges(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "p")
	require.NoError(t, os.WriteFile(path, make([]byte, 8<<20), 0o600))
	r, err := Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	r.guess.Store(101)
	plan := func(offs ...int64) []mergedRead {
		v := &vectored{r: r, offs: offs}
		v.plan()
		served := make([]int, len(offs))
		for _, m := range v.reads {
			assert.LessOrEqual(t, m.hi-m.lo, int64(r.c.Large().Size()))
			for _, i := range v.order[m.first:m.last] {
				served[i]++
				assert.GreaterOrEqual(t, offs[i], m.lo)
				assert.Less(t, offs[i], m.hi)
			}
		}
		for i, n := range served {
			assert.Equal(t, 1, n, "offset %d served %d times", i, n)
		}
		return v.reads
	}
	var row []int64
	for i := range 200 {
		row = append(row, int64(199-i)*101) // backwards
	}
	assert.Len(t, plan(row...), 1, "200 neighbours of 101 bytes")
	assert.Len(t, plan(0, 0, 0, 101), 1, "duplicates")
	assert.Len(t, plan(0, 64<<10, 128<<10), 3, "64 KiB gaps")
	assert.Len(t, plan(0, maxMergeGap), 1, "a gap up to maxMergeGap is read")
	var long []int64
	for off := int64(0); off < 1<<20; off += 4096 {
		long = append(long, off)
	}
	reads := plan(long...)
	assert.GreaterOrEqual(t, len(reads), (1<<20)/MergeSize, "merged past MergeSize")
}
