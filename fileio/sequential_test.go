package fileio_test

import (
	"bufio"
	"bytes"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// readCounter is an Injector that injects nothing and records the reads
// the engine makes: their offsets and lengths.
type readCounter struct {
	mu    sync.Mutex
	reads [][2]int64
}

func (c *readCounter) Inject(op direct.Op, off int64, n int) (direct.Fault, bool) {
	if op == direct.OpRead {
		c.mu.Lock()
		c.reads = append(c.reads, [2]int64{off, int64(n)})
		c.mu.Unlock()
	}
	return direct.Fault{}, false
}

func (c *readCounter) take() [][2]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reads
	c.reads = nil
	return r
}

// seqFile writes n bytes to a new file in a test directory and returns
// its path and contents.
func seqFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	path := filepath.Join(testenv.Dir(t), "f")
	w, err := fileio.Create(path, nil)
	require.NoError(t, err)
	want := content(21, n)
	_, err = w.Write(want)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return path, want
}

// TestSequentialCopy: io.Copy (through WriteTo), bufio and io.ReadFull
// over a Sequential read the file exactly, under every policy.
func TestSequentialCopy(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			path, want := seqFile(t, 5<<20+123)
			r, err := fileio.Open(path, &fileio.Options{IO: p})
			require.NoError(t, err)
			defer r.Close()

			s, err := r.NewSequential(0)
			require.NoError(t, err)
			var got bytes.Buffer
			n, err := io.Copy(&got, s)
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), n)
			require.True(t, bytes.Equal(want, got.Bytes()))
			m, err := s.Read(make([]byte, 10))
			assert.Zero(t, m)
			assert.ErrorIs(t, err, io.EOF)

			// bufio in odd sizes, from an unaligned start.
			_, err = s.Seek(777, io.SeekStart)
			require.NoError(t, err)
			br := bufio.NewReaderSize(struct{ io.Reader }{s}, 10_007) // no WriteTo: Read alone
			got.Reset()
			_, err = io.Copy(&got, br)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want[777:], got.Bytes()))

			// Seek from the end and from here.
			pos, err := s.Seek(-1000, io.SeekEnd)
			require.NoError(t, err)
			require.Equal(t, int64(len(want)-1000), pos)
			pos, err = s.Seek(-24, io.SeekCurrent)
			require.NoError(t, err)
			tail := make([]byte, 1024)
			_, err = io.ReadFull(s, tail)
			require.NoError(t, err)
			require.Equal(t, want[pos:], tail)
			_, err = s.Seek(-1, io.SeekStart)
			require.ErrorIs(t, err, fileio.ErrOffset)
			require.NoError(t, s.Close())
		})
	}
}

// TestSequentialReadAt: ReadAt calls in order, 4 KiB to 40 KiB at a
// time as a compaction reads blocks, are served by reads that grow to
// 512 KiB, far fewer than the calls; a ReadAt out of order (a footer) goes
// to the file alone and the scan goes on from its window.
func TestSequentialReadAt(t *testing.T) {
	if testenv.RejectsDirect() {
		t.Skip("counts O_DIRECT reads")
	}
	path, want := seqFile(t, 8<<20)
	var c readCounter
	r, err := fileio.Open(path, &fileio.Options{Faults: &c})
	require.NoError(t, err)
	defer r.Close()
	s, err := r.NewSequential(0)
	require.NoError(t, err)
	defer s.Close()

	rnd := rand.New(rand.NewPCG(1, 2))
	calls := 0
	var longest int64
	for off := int64(0); off < int64(len(want)); {
		n := 4<<10 + rnd.IntN(36<<10)
		p := make([]byte, n)
		m, err := s.ReadAt(p, off)
		if err == io.EOF {
			err = nil
		}
		require.NoError(t, err)
		require.Equal(t, want[off:off+int64(m)], p[:m])
		calls++
		off += int64(m)
		if calls == 50 {
			// A look at the footer, out of order.
			c.take()
			foot := make([]byte, 100)
			_, err := s.ReadAt(foot, int64(len(want)-100))
			require.NoError(t, err)
			require.Equal(t, want[len(want)-100:], foot)
			// The window's reads may still be on their way to the
			// device (io_uring's workers): count those near the footer.
			var near [][2]int64
			for _, rd := range c.take() {
				if rd[0] >= int64(len(want)-1<<20) {
					near = append(near, rd)
				}
			}
			require.Len(t, near, 1, "a ReadAt out of order is one read of its own")
			require.LessOrEqual(t, near[0][1], int64(4096), "and no read-ahead")
		}
	}
	reads := c.take()
	for _, rd := range reads {
		longest = max(longest, rd[1])
	}
	t.Logf("%d ReadAt calls, %d device reads, the longest %d bytes", calls, len(reads), longest)
	require.Less(t, len(reads), calls/5, "the read-ahead serves most calls")
	require.Equal(t, int64(512<<10), longest, "reads grow to 512 KiB")
}

// TestSequentialStart: the first read after a start reads 64 KiB, not
// the whole read-ahead, so that a short scan costs little.
func TestSequentialStart(t *testing.T) {
	if testenv.RejectsDirect() {
		t.Skip("counts O_DIRECT reads")
	}
	path, want := seqFile(t, 4<<20)
	var c readCounter
	r, err := fileio.Open(path, &fileio.Options{Faults: &c})
	require.NoError(t, err)
	defer r.Close()
	s, err := r.NewSequential(1 << 20)
	require.NoError(t, err)
	p := make([]byte, 100)
	_, err = io.ReadFull(s, p)
	require.NoError(t, err)
	require.Equal(t, want[1<<20:1<<20+100], p)
	require.NoError(t, s.Close()) // waits for the reads in flight
	var total int64
	for _, rd := range c.take() {
		total += rd[1]
	}
	require.Less(t, total, int64(4<<20-1<<20), "the start read the rest of the file")
	require.Greater(t, total, int64(64<<10), "nothing read ahead")
}

// TestSequentialSize: with Options.Size a Sequential ends there, though
// the file goes on.
func TestSequentialSize(t *testing.T) {
	path, want := seqFile(t, 1<<20)
	r, err := fileio.Open(path, &fileio.Options{Size: 300_001})
	require.NoError(t, err)
	defer r.Close()
	s, err := r.NewSequential(0)
	require.NoError(t, err)
	got, err := io.ReadAll(s)
	require.NoError(t, err)
	require.Equal(t, want[:300_001], got)
	n, err := s.ReadAt(make([]byte, 10), 300_000)
	require.Equal(t, 1, n)
	require.ErrorIs(t, err, io.EOF)
}

// TestSequentialCloseRace closes the Reader while Sequentials read:
// every call returns data or an error matching ErrClosed, nothing hangs,
// and -race sees no race.
func TestSequentialCloseRace(t *testing.T) {
	path, want := seqFile(t, 2<<20)
	for range 10 {
		r, err := fileio.Open(path, nil)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				s, err := r.NewSequential(int64(g) * 1000)
				if err != nil {
					assert.ErrorIs(t, err, fileio.ErrClosed)
					return
				}
				p := make([]byte, 33_333)
				for {
					pos, _ := s.Seek(0, io.SeekCurrent)
					n, err := s.Read(p)
					if err != nil {
						if err != io.EOF {
							assert.ErrorIs(t, err, fileio.ErrClosed)
						}
						return
					}
					if !bytes.Equal(want[pos:pos+int64(n)], p[:n]) {
						t.Errorf("wrong bytes at %d", pos)
						return
					}
				}
			})
		}
		require.NoError(t, r.Close())
		wg.Wait()
	}
}
