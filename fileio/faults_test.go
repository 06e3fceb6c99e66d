package fileio_test

import (
	"bytes"
	"io"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/filetest"
)

// faultWriter is a fileio.Writer under a fault plan: the bytes it wrote,
// and how many of them a Sync acknowledged.
type faultWriter struct {
	w      *fileio.Writer
	path   string
	size   func(i int) int
	all    []byte
	synced int
}

func (fw *faultWriter) Append(i int) error {
	p := content(uint64(i), fw.size(i))
	n, err := fw.w.Write(p)
	fw.all = append(fw.all, p[:n]...)
	return err
}

func (fw *faultWriter) Sync() error {
	if err := fw.w.Sync(); err != nil {
		return err
	}
	fw.synced = len(fw.all)
	return nil
}

func (fw *faultWriter) Finish(t *testing.T, errno syscall.Errno) {
	want := fw.all
	if errno == 0 {
		require.NoError(t, fw.w.Close())
	} else {
		assert.ErrorIs(t, fw.w.Close(), errno, "Close reports it")
		want = fw.all[:fw.synced]
	}
	require.Equal(t, int64(fw.synced), min(fw.w.Synced(), int64(fw.synced)), "Synced went back")
	r, err := fileio.Open(fw.path, nil)
	require.NoError(t, err)
	defer r.Close()
	require.GreaterOrEqual(t, r.Size(), int64(len(want)))
	got := make([]byte, len(want))
	n, err := r.ReadAt(got, 0)
	if err != io.EOF {
		require.NoError(t, err)
	}
	require.Equal(t, len(want), n)
	require.True(t, bytes.Equal(want, got), "acknowledged bytes lost")
	t.Logf("%d bytes synced before the fault, all read back", fw.synced)
}

// TestWriteFailure fails the n-th write or fdatasync with EIO or ENOSPC:
// the error reaches the caller and stays, every byte covered by an
// earlier successful Sync reads back, the buffers go back to the pool,
// and no descriptor or goroutine is left.
func TestWriteFailure(t *testing.T) {
	filetest.FaultTest{
		Open: func(t *testing.T, dir string, p fallback.Policy, plan *faults.Plan) (filetest.Writer, *aligned.Pool) {
			pool, err := aligned.NewPool(8<<10, 4096, 4*(8<<10))
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			path := filepath.Join(dir, "f")
			w, err := fileio.Create(path, &fileio.Options{IO: p, Pool: pool, Buffers: 3, Faults: plan})
			require.NoError(t, err)
			return &faultWriter{w: w, path: path, size: func(i int) int { return 1 + i*37%3000 }}, pool
		},
		Appends:   5000,
		SyncEvery: 40,
	}.Run(t, filetest.Failures(direct.OpWrite, direct.OpSync))
}

// TestTransientFaults makes writes and fdatasyncs hit EINTR, EAGAIN,
// short transfers and late completions: the engines retry and resume,
// and the caller sees nothing but correct data.
func TestTransientFaults(t *testing.T) {
	filetest.FaultTest{
		Open: func(t *testing.T, dir string, p fallback.Policy, plan *faults.Plan) (filetest.Writer, *aligned.Pool) {
			path := filepath.Join(dir, "f")
			w, err := fileio.Create(path, &fileio.Options{IO: p, BufferSize: 16 << 10, Buffers: 3, Faults: plan})
			require.NoError(t, err)
			return &faultWriter{w: w, path: path, size: func(i int) int { return 1 + i%20_000 }}, nil
		},
		Appends:   1500,
		SyncEvery: 300,
	}.Run(t, []filetest.Fault{{
		Name:  "transient",
		Rules: append(filetest.TransientWrites(20, 5), faults.Transient(direct.OpSync, 3, syscall.EINTR)),
		Kinds: []string{"EINTR", "EAGAIN", "short", "late"},
	}})
}

// TestReadFaults: a read that fails with EIO is read again sector by
// sector, so an EIO that passes costs nothing and a bad sector reaches
// the caller of ReadAt named, with the bytes before it; a Sequential's
// reads do the same; transient read faults (EINTR, short reads) are
// hidden.
func TestReadFaults(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	w, err := fileio.Create(path, nil)
	require.NoError(t, err)
	want := content(9, 3<<20)
	_, err = w.Write(want)
	require.NoError(t, err)
	require.NoError(t, w.Close())

	eioOnce := func(n int) *faults.Plan { // the n-th read fails, and no other
		return faults.NewPlan(faults.Rule{Op: direct.OpRead, After: n, Times: 1, Fault: direct.Fault{Err: syscall.EIO}})
	}
	plan := eioOnce(1)
	r, err := fileio.Open(path, &fileio.Options{Faults: plan})
	require.NoError(t, err)
	defer r.Close()
	p := make([]byte, 10_000)
	_, err = r.ReadAt(p, 5)
	require.NoError(t, err, "the first read passes")
	_, err = r.ReadAt(p, 50_000)
	require.NoError(t, err, "the second read fails, and its sector-by-sector retry passes")
	require.Equal(t, want[50_000:60_000], p)
	require.Equal(t, 1, plan.Injected()["EIO"])

	// A bad sector (latent sector error) fails every read covering it:
	// ReadAt returns the bytes before it and an error naming it.
	rb, err := fileio.Open(path, &fileio.Options{Faults: faults.NewPlan(faults.BadSectors(53248, 4096))})
	require.NoError(t, err)
	defer rb.Close()
	clear(p)
	n, err := rb.ReadAt(p, 50_000)
	require.ErrorIs(t, err, syscall.EIO, "a read over a bad sector fails")
	var se *direct.SectorError
	require.ErrorAs(t, err, &se)
	assert.True(t, se.Off >= 53248 && se.Off+int64(se.Len) <= 53248+4096, "names the bad sector: %v", err)
	require.Equal(t, 53248-50_000, n, "the bytes before it")
	require.Equal(t, want[50_000:53248], p[:n])
	_, err = rb.ReadAt(p, 60_000)
	require.NoError(t, err, "a read error is not sticky")
	require.Equal(t, want[60_000:70_000], p)
	big := make([]byte, 2<<20) // read in pieces, several in flight
	n, err = rb.ReadAt(big, 4096)
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorAs(t, err, &se)
	require.Equal(t, 53248-4096, n, "the bytes before the bad sector")
	require.Equal(t, want[4096:53248], big[:n])

	// A Sequential's windows are read again sector by sector too: an EIO
	// that passes is hidden, a bad sector reaches the reader after the
	// bytes before it, named, at every try, and the bytes after it can
	// be read from a position past it.
	plan = eioOnce(2)
	r2, err := fileio.Open(path, &fileio.Options{Faults: plan})
	require.NoError(t, err)
	defer r2.Close()
	s, err := r2.NewSequential(0)
	require.NoError(t, err)
	var got bytes.Buffer
	_, err = io.Copy(&got, s)
	require.NoError(t, err, "a read-ahead's EIO that passes on the retry")
	require.True(t, bytes.Equal(want, got.Bytes()))
	require.Equal(t, 1, plan.Injected()["EIO"])
	require.NoError(t, s.Close())

	s, err = rb.NewSequential(0)
	require.NoError(t, err)
	for try := range 2 {
		got.Reset()
		_, err = s.Seek(0, io.SeekStart)
		require.NoError(t, err)
		_, err = io.Copy(&got, s)
		require.ErrorIs(t, err, syscall.EIO, "try %d: the bad sector reaches the reader", try)
		require.ErrorAs(t, err, &se)
		assert.True(t, se.Off >= 53248 && se.Off+int64(se.Len) <= 53248+4096, "names the bad sector: %v", err)
		require.True(t, bytes.Equal(want[:53248], got.Bytes()), "try %d: every byte before it, and no other (%d bytes)", try, got.Len())
	}
	n, err = s.ReadAt(p, 50_000)
	require.ErrorIs(t, err, syscall.EIO, "ReadAt through the read-ahead")
	require.Equal(t, 53248-50_000, n, "the bytes before the bad sector")
	require.Equal(t, want[50_000:53248], p[:n])
	got.Reset()
	_, err = s.Seek(53248+4096, io.SeekStart)
	require.NoError(t, err)
	_, err = io.Copy(&got, s)
	require.NoError(t, err, "past the bad sector")
	require.True(t, bytes.Equal(want[53248+4096:], got.Bytes()))
	require.NoError(t, s.Close())

	plan = faults.NewPlan(faults.Transient(direct.OpRead, 5, syscall.EINTR), faults.Short(direct.OpRead, 5, 4096))
	r3, err := fileio.Open(path, &fileio.Options{Faults: plan})
	require.NoError(t, err)
	defer r3.Close()
	s, err = r3.NewSequential(0)
	require.NoError(t, err)
	got.Reset()
	_, err = io.Copy(&got, s)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got.Bytes()))
	require.NoError(t, s.Close())
	assert.Positive(t, plan.Injected()["EINTR"])
}
