package direct_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/testenv"
)

// unit is the length of the untorn writes the tests make: the issue's
// 64 KiB, within what xfs with reflink takes (4 KiB to 1 MiB here).
const unit = 64 << 10

// TestAtomicWrite: where the file has untorn writes (the xfs leg) the
// limits come from statx, 64 KiB writes at 64 KiB-aligned offsets succeed
// and read back, and a length or offset outside the unit's rules, or an
// unaligned buffer, is refused with ErrUnaligned before the kernel sees
// it; where it has none (tmpfs, ext4 without bigalloc, btrfs) every
// WriteAtomicAt fails with errors.ErrUnsupported and writes nothing.
func TestAtomicWrite(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "atomic")
	f := openOrSkip(t, path, os.O_RDWR|os.O_CREATE)
	defer f.Close()
	lim := f.AtomicWrite()
	fs, _ := direct.Filesystem(path)
	t.Logf("%s (leg %q): untorn writes %+v", fs, testenv.FS(), lim)
	buf, err := aligned.New(2*unit, f.Alignment().Memory)
	require.NoError(t, err)
	defer buf.Free()
	p := buf.Bytes()[:unit]

	switch fs {
	case "xfs":
		require.True(t, lim.Supported(), "xfs with reflink (the mkfs default) has untorn writes")
	case "tmpfs", "ext4", "btrfs":
		require.False(t, lim.Supported(), "%s has no untorn writes on these devices", fs)
	}
	if !lim.Supported() {
		_, err := f.WriteAtomicAt(p, 0)
		require.ErrorIs(t, err, errors.ErrUnsupported)
		st, err := f.Stat()
		require.NoError(t, err)
		assert.Zero(t, st.Size(), "nothing written")
		return
	}
	require.True(t, lim.Min > 0 && lim.Min&(lim.Min-1) == 0 && lim.Max&(lim.Max-1) == 0 && lim.Min <= lim.Max, "limits %+v", lim)
	if lim.Min > unit || lim.Max < unit {
		t.Skipf("64 KiB is outside the unit %+v", lim)
	}

	offs := []int64{0, unit, 5 * unit, 2 * unit}
	for i, off := range offs {
		for j := range p {
			p[j] = byte(i*31 + j%251 + 1)
		}
		n, err := f.WriteAtomicAt(p, off)
		require.NoError(t, err, "64 KiB at %d", off)
		require.Equal(t, unit, n)
	}
	got := buf.Bytes()[unit:]
	for i, off := range offs {
		_, err := f.ReadAt(got, off)
		require.NoError(t, err)
		for j := range p {
			p[j] = byte(i*31 + j%251 + 1)
		}
		require.True(t, bytes.Equal(p, got), "unit at %d", off)
	}

	refused := []struct {
		name string
		p    []byte
		off  int64
	}{
		{"offset not a multiple of the length", p, unit / 2},
		{"length not a power of two", buf.Bytes()[:3*lim.Min], 0},
		{"longer than Max", make([]byte, 2*lim.Max), 0},
		{"negative offset", p, -unit},
	}
	if lim.Min > 1 {
		refused = append(refused, struct {
			name string
			p    []byte
			off  int64
		}{"shorter than Min", p[:lim.Min/2], 0})
	}
	if a := f.Alignment().Memory; a > 1 {
		refused = append(refused, struct {
			name string
			p    []byte
			off  int64
		}{"buffer not aligned", buf.Bytes()[a/2 : a/2+unit], 0})
	}
	for _, r := range refused {
		_, err := f.WriteAtomicAt(r.p, r.off)
		if r.name == "negative offset" {
			assert.ErrorIs(t, err, direct.ErrNegativeOffset, r.name)
			continue
		}
		assert.ErrorIs(t, err, direct.ErrUnaligned, r.name)
	}
}

// TestAtomicWriteBuffered: a File over the page cache has no untorn
// writes (RWF_ATOMIC is for O_DIRECT writes here).
func TestAtomicWriteBuffered(t *testing.T) {
	o, err := os.Create(filepath.Join(testenv.Dir(t), "buffered"))
	require.NoError(t, err)
	f := direct.Buffered(o)
	defer f.Close()
	assert.False(t, f.AtomicWrite().Supported())
	_, err = f.WriteAtomicAt(make([]byte, 4096), 0)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
}
