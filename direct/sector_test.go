package direct_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestLatentSectors: a read covering bad sectors (a fault plan failing
// every read that touches them) returns every other byte of the range,
// the good prefix as its count, and an error naming each bad run that
// matches syscall.EIO; reads that miss them succeed.
func TestLatentSectors(t *testing.T) {
	dir := testenv.Dir(t)
	for _, direct_ := range []bool{true, false} {
		name := map[bool]string{true: "direct", false: "buffered"}[direct_]
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			var f *direct.File
			if direct_ {
				f = openOrSkip(t, path, os.O_RDWR|os.O_CREATE)
			} else {
				o, err := os.Create(path)
				require.NoError(t, err)
				f = direct.Buffered(o)
			}
			defer f.Close()
			sector := max(f.Alignment().Offset, 512)
			const size = 64 << 10
			buf, err := aligned.New(size, max(f.Alignment().Memory, 4096))
			require.NoError(t, err)
			defer buf.Free()
			want := make([]byte, size)
			for i := range want {
				want[i] = byte(i/7 + 1)
			}
			copy(buf.Bytes(), want)
			_, err = f.WriteAt(buf.Bytes(), 0)
			require.NoError(t, err)

			// Two bad runs: one sector at 3 sectors in, two at 10.
			plan := faults.NewPlan(faults.BadSectors(int64(3*sector), int64(sector)), faults.BadSectors(int64(10*sector), int64(2*sector)))
			g := f.WithFaults(plan)
			p := buf.Bytes()
			clear(p)
			n, err := g.ReadAt(p, 0)
			require.Error(t, err)
			assert.ErrorIs(t, err, syscall.EIO)
			assert.Equal(t, 3*sector, n, "the good prefix")
			var se *direct.SectorError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, int64(3*sector), se.Off)
			assert.Equal(t, sector, se.Len)
			assert.Contains(t, err.Error(), fmt.Sprintf("bytes [%d, %d)", 3*sector, 4*sector), "the message names the range")
			var runs [][2]int64
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				require.ErrorAs(t, e, &se)
				runs = append(runs, [2]int64{se.Off, int64(se.Len)})
			}
			assert.Equal(t, [][2]int64{{int64(3 * sector), int64(sector)}, {int64(10 * sector), int64(2 * sector)}}, runs)
			for s := 0; s < size; s += sector {
				bad := s == 3*sector || s == 10*sector || s == 11*sector
				if bad {
					assert.Equal(t, make([]byte, sector), p[s:s+sector], "bad sector at %d zeroed", s)
				} else {
					require.True(t, bytes.Equal(want[s:s+sector], p[s:s+sector]), "good sector at %d read", s)
				}
			}

			// A read that misses them succeeds.
			n, err = g.ReadAt(p[:2*sector], int64(4*sector))
			require.NoError(t, err)
			assert.Equal(t, 2*sector, n)
			assert.Equal(t, want[4*sector:6*sector], p[:2*sector])
		})
	}
}

// TestReadSectors drives the splitting alone: pieces cut at multiples of
// the sector, a bad run in the middle, and the end of the file inside
// the range.
func TestReadSectors(t *testing.T) {
	data := make([]byte, 5000)
	for i := range data {
		data[i] = byte(i%250 + 1)
	}
	var calls [][2]int64
	read := func(p []byte, off int64) (int, error) {
		calls = append(calls, [2]int64{off, int64(len(p))})
		if off < 1536 && off+int64(len(p)) > 1024 {
			return 0, &os.PathError{Op: "pread", Path: "f", Err: syscall.EIO}
		}
		if off >= int64(len(data)) {
			return 0, io.EOF
		}
		n := copy(p, data[off:])
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	p := make([]byte, 6000)
	n, err := direct.ReadSectors(read, p, 100, 512)
	assert.Equal(t, 1024-100, n)
	var se *direct.SectorError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, direct.SectorError{Off: 1024, Len: 512, Err: se.Err}, *se)
	assert.True(t, errors.Is(err, syscall.EIO))
	assert.Equal(t, [2]int64{100, 412}, calls[0], "the first piece ends at a sector boundary")
	assert.Equal(t, data[100:1024], p[:924])
	assert.Equal(t, data[1536:], p[1436:1436+len(data)-1536], "good pieces past the bad one read")
}
