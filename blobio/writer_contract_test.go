package blobio_test

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestCreateInvalidOptions: Options no file can take are refused with
// ErrInvalidOptions, in words of blobio's own, and no file is left.
func TestCreateInvalidOptions(t *testing.T) {
	misfit, err := aligned.NewPool(1000, 8, 4000) // no direct file has an alignment dividing 1000
	require.NoError(t, err)
	defer misfit.Close()
	for _, c := range []struct {
		name string
		o    blobio.Options
	}{
		{"negative buffers", blobio.Options{Buffers: -1}},
		{"negative buffer size", blobio.Options{BufferSize: -4096}},
		{"unknown compression", blobio.Options{Compression: 7}},
		{"unknown policy", blobio.Options{IO: 99}},
		{"too many buffers", blobio.Options{Buffers: 1 << 20}},
		{"ring over memory", blobio.Options{Buffers: 16, BufferSize: math.MaxInt / 4}},
		{"pool misfit", blobio.Options{Pool: misfit, IO: fallback.Direct}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.o.Pool != nil && testenv.RejectsDirect() {
				t.Skip("every pool fits the page cache")
			}
			dir := testenv.Dir(t)
			w, err := blobio.Create(filepath.Join(dir, "f.blob"), &c.o)
			if err == nil {
				w.Close()
			}
			require.ErrorIs(t, err, blobio.ErrInvalidOptions)
			assert.NotContains(t, err.Error(), "appender", "the message names an internal package")
			ents, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, ents, "a refused Create left a file")
		})
	}
}

// TestCreateKeepsExistingFile: a Create refused because the file exists
// leaves that file alone (the failures that remove the file are in
// TestCreateInvalidOptions, pool misfit, and TestCreateSyncsDirectory).
func TestCreateKeepsExistingFile(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f.blob")
	require.NoError(t, os.WriteFile(path, []byte("mine"), 0o644))
	_, err := blobio.Create(path, nil)
	require.ErrorIs(t, err, fs.ErrExist)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "mine", string(got), "Create removed a file it did not create")
}

// TestClosedWriter: every method after Close returns ErrClosed, which
// matches fs.ErrClosed as os.File's errors do.
func TestClosedWriter(t *testing.T) {
	w, err := blobio.Create(filepath.Join(testenv.Dir(t), "f.blob"), nil)
	require.NoError(t, err)
	_, err = w.WriteBlob([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, err = w.WriteBlob([]byte("y"))
	errs := []error{err, w.Sync(), w.Close()}
	for i, err := range errs {
		assert.ErrorIs(t, err, fs.ErrClosed, "call %d", i)
		assert.ErrorIs(t, err, blobio.ErrClosed, "call %d", i)
	}
	assert.Equal(t, int64(1+1), w.Synced(), "Synced survives Close")
}

// TestClosedReader: every method of a closed Reader, and a Scanner over
// it made before or after Close, fails with an error matching both
// ErrClosed and fs.ErrClosed (issue 12, item 8).
func TestClosedReader(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "f.blob")
	w, err := blobio.Create(path, nil)
	require.NoError(t, err)
	_, err = w.WriteBlob([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	before := blobio.NewScanner(r)
	require.NoError(t, r.Close())
	after := blobio.NewScanner(r)
	calls := map[string]func() error{
		"ReadBlob":  func() error { _, err := r.ReadBlob(0, nil); return err },
		"ReadBlobs": func() error { return r.ReadBlobs([]int64{0}, func(int, []byte) error { return nil }) },
		"ReadAt":    func() error { _, err := r.ReadAt(make([]byte, 1), 0); return err },
		"Close":     r.Close,
		"Scanner made before Close": func() error {
			assert.False(t, before.Scan())
			return before.Err()
		},
		"Scanner made after Close": func() error {
			assert.False(t, after.Scan())
			return after.Err()
		},
	}
	for name, call := range calls {
		err := call()
		assert.ErrorIs(t, err, fs.ErrClosed, name)
		assert.ErrorIs(t, err, blobio.ErrClosed, name)
	}
}

// TestZstdTooLarge: with Zstd a blob over MaxBlobSize is refused before it
// is compressed (zeros would compress to a few bytes and pass a check on
// the stored length), and the writer stays usable.
func TestZstdTooLarge(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "z.blob")
	w, err := blobio.Create(path, &blobio.Options{Compression: blobio.Zstd})
	require.NoError(t, err)
	_, err = w.WriteBlob(make([]byte, blobio.MaxBlobSize+1))
	require.ErrorIs(t, err, blobio.ErrBlobTooLarge)
	want := content(3, 5000)
	off, err := w.WriteBlob(want)
	require.NoError(t, err)
	assert.Zero(t, off, "the refused blob took no space")
	require.NoError(t, w.Close())
	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	got, err := r.ReadBlob(0, nil)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// TestSynced follows Synced through Syncs, writes and Close: it moves only
// when something is made durable.
func TestSynced(t *testing.T) {
	for _, p := range testenv.Policies() {
		for _, noSync := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/nosync=%v", p, noSync), func(t *testing.T) {
				w, err := blobio.Create(filepath.Join(testenv.Dir(t), "f.blob"), &blobio.Options{IO: p, BufferSize: 8192, NoSync: noSync})
				require.NoError(t, err)
				assert.Zero(t, w.Synced())
				for i := range 100 {
					_, err := w.WriteBlob(content(i, 300))
					require.NoError(t, err)
				}
				assert.Zero(t, w.Synced(), "nothing synced yet")
				require.NoError(t, w.Sync())
				synced := w.Size()
				assert.Equal(t, synced, w.Synced())
				_, err = w.WriteBlob(content(0, 100_000))
				require.NoError(t, err)
				assert.Equal(t, synced, w.Synced(), "a write is not durable")
				size := w.Size()
				require.NoError(t, w.Close())
				if noSync {
					assert.Equal(t, synced, w.Synced(), "a Close with NoSync makes nothing durable")
				} else {
					assert.Equal(t, size, w.Synced())
				}
			})
		}
	}
}

// toggle is an Injector that fails every write (or fdatasync) with err
// once switched on.
type toggle struct {
	on  atomic.Bool
	op  direct.Op
	err syscall.Errno
}

func (f *toggle) Inject(op direct.Op, off int64, n int) (direct.Fault, bool) {
	if op != f.op || !f.on.Load() {
		return direct.Fault{}, false
	}
	return direct.Fault{Err: f.err}, true
}

// TestFailedCloseCutsBack: after EIO or ENOSPC on a write or an fdatasync,
// Close fails and leaves the file exactly Synced long: no grown-ahead
// zeros and no padding past the data, and every synced blob reads back.
func TestFailedCloseCutsBack(t *testing.T) {
	for _, p := range testenv.Policies() {
		for _, op := range []direct.Op{direct.OpWrite, direct.OpSync} {
			for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
				for _, early := range []bool{false, true} {
					t.Run(fmt.Sprintf("%v/%v/%v/fail-in-sync=%v", p, op, errno, early), func(t *testing.T) {
						failedCloseCutsBack(t, p, &toggle{op: op, err: errno}, early)
					})
				}
			}
		}
	}
}

func failedCloseCutsBack(t *testing.T, p fallback.Policy, inj *toggle, failInSync bool) {
	path := filepath.Join(testenv.Dir(t), "f.blob")
	w, err := blobio.Create(path, &blobio.Options{IO: p, BufferSize: 8192, Buffers: 4, Faults: inj})
	require.NoError(t, err)
	var offs []int64
	for i := range 300 {
		off, err := w.WriteBlob(content(i, 1000+i))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	require.NoError(t, w.Sync())
	synced := w.Synced()
	require.Equal(t, w.Size(), synced)

	inj.on.Store(true)
	for i := range 300 {
		if _, err := w.WriteBlob(content(i, 2000)); err != nil {
			require.ErrorIs(t, err, inj.err)
			break
		}
	}
	if failInSync {
		require.ErrorIs(t, w.Sync(), inj.err)
	}
	err = w.Close()
	require.ErrorIs(t, err, inj.err)
	assert.Equal(t, synced, w.Synced(), "a failed Close makes nothing durable")

	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, synced, st.Size(), "a failed Close leaves the file at Synced")
	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	s := blobio.NewScanner(r)
	n := 0
	for s.Scan() {
		require.Less(t, n, len(offs), "a blob past the synced ones")
		require.Equal(t, offs[n], s.Offset())
		require.Equal(t, content(n, 1000+n), s.Bytes())
		n++
	}
	require.NoError(t, s.Err())
	assert.Equal(t, len(offs), n)
}

// TestEmptyBlobBytes: an empty blob is stored with a 4-byte header, so the
// file holds no 0x00 where a header is: ["hello", ""] is 05 hello 80 00 00 00.
func TestEmptyBlobBytes(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			path := filepath.Join(testenv.Dir(t), "e.blob")
			w, err := blobio.Create(path, &blobio.Options{IO: p})
			require.NoError(t, err)
			for _, b := range []string{"hello", "", ""} {
				_, err := w.WriteBlob([]byte(b))
				require.NoError(t, err)
			}
			require.NoError(t, w.Close())
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, []byte("\x05hello\x80\x00\x00\x00\x80\x00\x00\x00"), got)
		})
	}
}

// TestCreateErrorsAreNotInvalid: errors of the filesystem are reported as
// themselves, not as invalid options.
func TestCreateErrorsAreNotInvalid(t *testing.T) {
	_, err := blobio.Create(filepath.Join(testenv.Dir(t), "no", "such", "dir", "f.blob"), nil)
	require.Error(t, err)
	assert.False(t, errors.Is(err, blobio.ErrInvalidOptions))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}
