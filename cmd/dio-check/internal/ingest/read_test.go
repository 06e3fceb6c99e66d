package ingest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/benchkit"
	"github.com/dio-storage/dio/internal/testenv"
)

// memoryFS reports whether the test filesystem keeps files in memory,
// where nothing can be dropped from the page cache.
func memoryFS() bool { return testenv.FS() == "tmpfs" || testenv.FS() == "ramfs" }

func writeBlobFile(t *testing.T, size int64) (string, []int64) {
	t.Helper()
	path := filepath.Join(testenv.Dir(t), "blobs")
	offs, err := WriteBlobFile(path, size)
	require.NoError(t, err)
	return path, offs
}

func TestWriteBlobFile(t *testing.T) {
	path, offs := writeBlobFile(t, 1<<20)
	require.Len(t, offs, int((1<<20)/blobRecord))
	for i, off := range offs {
		require.Equal(t, int64(i)*blobRecord, off)
	}
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, int64(len(offs))*blobRecord, st.Size(), "the file is its blobs, no padding")

	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	blob, err := r.ReadBlob(offs[len(offs)-1], nil)
	require.NoError(t, err)
	assert.NoError(t, checkBlob(offs[len(offs)-1], blob))
	assert.ErrorIs(t, checkBlob(offs[0], blob), errBadBlob)

	_, err = WriteBlobFile(filepath.Join(filepath.Dir(path), "tiny"), BlobSize)
	assert.ErrorContains(t, err, "holds no")
}

// TestRunRead runs every read method on every engine briefly and checks
// what each reports; the direct ones leave the file out of the page cache.
func TestRunRead(t *testing.T) {
	const size = 4 << 20
	path, offs := writeBlobFile(t, size)
	type run struct {
		method  string
		readers int
		batch   int
		engines []Engine
	}
	runs := []run{
		{ReadBlob, 1, 0, ReadEngines()},
		{ReadBlob, 4, 0, ReadEngines()},
		{ReadBlobs, 0, 64, ReadEngines()},
		{Pread, 1, 0, ReadEngines()[:1]},
		{Pread, 4, 0, ReadEngines()[:1]},
	}
	for _, rn := range runs {
		for _, e := range rn.engines {
			c := ReadConfig{Path: path, Offsets: offs, Method: rn.method, Engine: e, Readers: rn.readers, Batch: rn.batch, Duration: 20 * time.Millisecond, Seed: 1}
			r, err := RunRead(c)
			if rn.method == ReadBlobs && !HasReadBlobs() {
				assert.ErrorIs(t, err, ErrUnavailable, "ReadBlobs before it exists")
				continue
			}
			if errors.Is(err, ErrUnavailable) {
				if rn.method == Pread || e.Policy != ReadEngines()[0].Policy {
					t.Logf("%s/%s: %v", rn.method, e.Name, err)
					continue
				}
			}
			require.NoError(t, err, "%s/%d/%s", rn.method, rn.readers, e.Name)
			assert.Positive(t, r.Reads, rn.method)
			assert.GreaterOrEqual(t, r.Elapsed, c.Duration)
			assert.Positive(t, r.ReadsPerSec())
			assert.Equal(t, r.Reads*BlobSize, r.Bytes, "blob bytes")
			if (rn.method == Pread || e.Policy != ReadEngines()[0].Policy) && !memoryFS() {
				// btrfs may read part of a direct read through the page
				// cache (see PageCacheBytes); a read path through the
				// cache fills most of the file.
				limit := int64(size / 100)
				if testenv.FS() == "btrfs" {
					limit = size / 4
				}
				assert.Less(t, r.PageCacheBytes, limit, "%s/%s: direct reads fill no page cache", rn.method, e.Name)
			}
		}
	}
}

// TestRunReadStartsCold warms the file, then checks that a std-fs run
// finds it dropped from the page cache: a cached file measures memory.
// TestRunReadLate: a run whose readers all wake after its deadline (a
// loaded machine; here a deadline of a nanosecond) still reads once per
// reader, and a ReadBlobs run one batch: a row of no reads says nothing
// (the ramfs matrix leg under -race once reported 0 reads/s).
func TestRunReadLate(t *testing.T) {
	path, offs := writeBlobFile(t, 1<<20)
	e := ReadEngines()[0]
	r, err := RunRead(ReadConfig{Path: path, Offsets: offs, Method: ReadBlob, Engine: e, Readers: 4, Duration: time.Nanosecond, Seed: 1})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, r.Reads, int64(4))
	if HasReadBlobs() {
		r, err = RunRead(ReadConfig{Path: path, Offsets: offs, Method: ReadBlobs, Engine: e, Batch: 8, Duration: time.Nanosecond, Seed: 1})
		require.NoError(t, err)
		assert.GreaterOrEqual(t, r.Reads, int64(8))
	}
}

func TestRunReadStartsCold(t *testing.T) {
	if memoryFS() {
		t.Skip("a memory filesystem is its page cache")
	}
	const size = 8 << 20
	path, offs := writeBlobFile(t, size)
	_, err := os.ReadFile(path)
	require.NoError(t, err)
	warm, _, err := residentPath(path)
	require.NoError(t, err)
	require.Greater(t, warm, int64(size*9/10), "the file is cached after reading it")

	require.NoError(t, benchkit.DropCache(path))
	cold, _, err := residentPath(path)
	require.NoError(t, err)
	assert.Less(t, cold, int64(size/100))

	_, err = os.ReadFile(path)
	require.NoError(t, err)
	c := ReadConfig{Path: path, Offsets: offs[:1], Method: ReadBlob, Engine: ReadEngines()[0], Readers: 1, Duration: 5 * time.Millisecond}
	r, err := RunRead(c)
	require.NoError(t, err)
	// The one blob read, and its read-ahead.
	assert.Less(t, r.PageCacheBytes, int64(size/4), "%d reads", r.Reads)

	require.NoError(t, benchkit.DropCache(path))
	c.Cached = true
	r, err = RunRead(c)
	require.NoError(t, err)
	assert.Equal(t, int64(len(offs))*blobRecord, r.PageCacheBytes, "Cached starts with the file in the page cache")
}

// TestRunReadChecksBlobs corrupts one blob's embedded offset and checks
// that every method reports the wrong blob instead of counting it.
func TestRunReadChecksBlobs(t *testing.T) {
	path, offs := writeBlobFile(t, 1<<20)
	k := len(offs) / 2
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	hs := blobRecord - BlobSize
	_, err = f.WriteAt([]byte{0xff}, offs[k]+hs)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())

	for _, m := range []string{ReadBlob, ReadBlobs, Pread} {
		for _, e := range ReadEngines() {
			c := ReadConfig{Path: path, Offsets: offs[k : k+1], Method: m, Engine: e, Readers: 2, Batch: 4, Duration: 10 * time.Millisecond}
			_, err := RunRead(c)
			if errors.Is(err, ErrUnavailable) {
				continue
			}
			assert.ErrorIs(t, err, errBadBlob, "%s/%s", m, e.Name)
		}
	}
}

func TestRunReadErrors(t *testing.T) {
	path, offs := writeBlobFile(t, 1<<20)
	good := ReadConfig{Path: path, Offsets: offs, Method: ReadBlob, Engine: ReadEngines()[0], Readers: 1, Duration: time.Millisecond}
	for name, mod := range map[string]func(*ReadConfig){
		"no offsets":   func(c *ReadConfig) { c.Offsets = nil },
		"no duration":  func(c *ReadConfig) { c.Duration = 0 },
		"no readers":   func(c *ReadConfig) { c.Readers = 0 },
		"no batch":     func(c *ReadConfig) { c.Method, c.Batch = ReadBlobs, 0 },
		"bad method":   func(c *ReadConfig) { c.Method = "mmap" },
		"missing file": func(c *ReadConfig) { c.Path += ".missing" },
	} {
		c := good
		mod(&c)
		_, err := RunRead(c)
		assert.Error(t, err, name)
	}
	_, err := RunRead(good)
	assert.NoError(t, err)
}

// fakeBlobs is ReadBlobs as its contract says, over a ReadBlob, so that
// the batch path runs before blobio has ReadBlobs.
type fakeBlobs struct {
	readBlob func(off int64, dst []byte) ([]byte, error)
	calls    int
}

func (f *fakeBlobs) ReadBlobs(offs []int64, fn func(i int, blob []byte) error) error {
	f.calls++
	var blob []byte
	for i, off := range offs {
		var err error
		if blob, err = f.readBlob(off, blob); err != nil {
			return err
		}
		if err := fn(i, blob); err != nil {
			return fmt.Errorf("blob %d at %d: %w", i, off, err)
		}
	}
	return nil
}

func TestBatches(t *testing.T) {
	path, offs := writeBlobFile(t, 1<<20)
	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	f := &fakeBlobs{readBlob: r.ReadBlob}
	c := ReadConfig{Path: path, Offsets: offs, Method: ReadBlobs, Batch: 8, Duration: 10 * time.Millisecond}
	res, err := c.batches(f)
	require.NoError(t, err)
	assert.Positive(t, f.calls)
	assert.Equal(t, int64(f.calls*c.Batch), res.Reads, "every offset of every call counts")
	assert.Equal(t, res.Reads*BlobSize, res.Bytes)
	assert.GreaterOrEqual(t, res.Elapsed, c.Duration)

	// A read error, and a wrong blob, stop the run with the error.
	c.Offsets = []int64{1 << 40}
	_, err = c.batches(f)
	assert.ErrorIs(t, err, blobio.ErrOffset)
	c.Offsets = offs[1:2]
	wrong := func(_ int64, dst []byte) ([]byte, error) { return r.ReadBlob(offs[0], dst) }
	_, err = c.batches(&fakeBlobs{readBlob: wrong})
	assert.ErrorIs(t, err, errBadBlob)
}
