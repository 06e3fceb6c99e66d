package ephemeral_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

func TestReadWhatWasWritten(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			dir := testenv.Dir(t)
			f, err := ephemeral.Create(dir, &ephemeral.Options{IO: p, BufferSize: 8 << 10, Buffers: 3})
			require.NoError(t, err)
			testenv.RequireEmpty(t, dir)
			if testenv.RejectsDirect() {
				assert.Equal(t, "std-fs", f.Mode().Name())
				if p == fallback.Auto {
					assert.True(t, strings.HasPrefix(f.Mode().String(), "std-fs: "), f.Mode().String())
				}
			}
			var mirror []byte
			var offs []int64
			var blobs [][]byte
			r := rand.New(rand.NewPCG(1, 2))
			for i := range 2000 {
				p := make([]byte, r.IntN(300))
				for j := range p {
					p[j] = byte(i + j)
				}
				if i%3 == 0 {
					off, err := f.Write(p)
					require.NoError(t, err)
					assert.Equal(t, len(p), off)
				} else {
					off, err := f.WriteBlob(p)
					require.NoError(t, err)
					require.Equal(t, int64(len(mirror)), off)
					offs, blobs = append(offs, off), append(blobs, p)
					mirror, _ = blobio.AppendHeader(mirror, len(p), blobio.None)
				}
				mirror = append(mirror, p...)
				require.Equal(t, int64(len(mirror)), f.Size())
				switch i % 700 {
				case 350: // the padded tail goes to disk and is rewritten later
					require.NoError(t, f.Flush())
				case 699:
					require.NoError(t, f.Sync())
				}
				// The tail just written reads back at once.
				tail := min(len(mirror), 500)
				got := make([]byte, tail)
				n, err := f.ReadAt(got, int64(len(mirror)-tail))
				require.NoError(t, err)
				require.Equal(t, tail, n)
				require.True(t, bytes.Equal(mirror[len(mirror)-tail:], got), "tail at write %d", i)
			}
			// Every range: on disk, in flight, in the tail, and across.
			for range 300 {
				off := r.IntN(len(mirror))
				n := r.IntN(40 << 10)
				got := make([]byte, n)
				k, err := f.ReadAt(got, int64(off))
				want := mirror[off:min(off+n, len(mirror))]
				require.Equal(t, len(want), k)
				if off+n > len(mirror) {
					require.ErrorIs(t, err, io.EOF)
				} else {
					require.NoError(t, err)
				}
				require.True(t, bytes.Equal(want, got[:k]), "range [%d, %d)", off, off+n)
			}
			var buf []byte
			for i, off := range offs {
				buf, err = f.ReadBlob(off, buf)
				require.NoError(t, err)
				require.True(t, bytes.Equal(blobs[i], buf), "blob %d", i)
			}
			require.NoError(t, f.Close())
			testenv.RequireEmpty(t, dir)
		})
	}
}

func TestErrors(t *testing.T) {
	dir := testenv.Dir(t)
	f, err := ephemeral.Create(dir, nil)
	require.NoError(t, err)
	_, err = f.Write([]byte("abc"))
	require.NoError(t, err)

	n, err := f.ReadAt(make([]byte, 10), 1)
	assert.Equal(t, 2, n)
	assert.ErrorIs(t, err, io.EOF)
	n, err = f.ReadAt(make([]byte, 10), 3)
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF)
	_, err = f.ReadAt(make([]byte, 1), -1)
	assert.Error(t, err)
	_, err = f.ReadBlob(100, nil)
	assert.ErrorIs(t, err, blobio.ErrOffset)
	_, err = f.ReadBlob(0, nil) // 'a' = 97: a 97-byte blob that is not there
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)

	require.NoError(t, f.Close())
	_, err = f.Write([]byte("x"))
	assert.ErrorIs(t, err, ephemeral.ErrClosed)
	assert.ErrorIs(t, f.Flush(), ephemeral.ErrClosed)
	assert.ErrorIs(t, f.Sync(), ephemeral.ErrClosed)
	_, err = f.WriteBlob([]byte("x"))
	assert.ErrorIs(t, err, ephemeral.ErrClosed)
	_, err = f.ReadAt(make([]byte, 1), 0)
	assert.ErrorIs(t, err, ephemeral.ErrClosed)
	_, err = f.ReadBlob(0, nil)
	assert.ErrorIs(t, err, ephemeral.ErrClosed)
	assert.ErrorIs(t, f.Close(), ephemeral.ErrClosed)

	_, err = ephemeral.Create(dir+"/missing", nil)
	assert.Error(t, err)
	file := dir + "/plain"
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = ephemeral.Create(file, nil)
	assert.Error(t, err, "a file where a directory is expected")
}

// TestConcurrentReaders has one writer appending random blobs and raw bytes
// while readers check random earlier ranges, mostly near the tail.
func TestConcurrentReaders(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: p, BufferSize: 16 << 10, Buffers: 3})
			require.NoError(t, err)
			defer f.Close()

			var mu sync.RWMutex
			var mirror []byte // what was appended, in order
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				defer close(stop)
				r := rand.New(rand.NewPCG(5, 6))
				for i := range 8000 {
					p := make([]byte, r.IntN(200))
					for j := range p {
						p[j] = byte(r.Uint32())
					}
					var rec []byte
					if r.IntN(2) == 0 {
						if _, err := f.Write(p); err != nil {
							t.Error(err)
							return
						}
					} else {
						if _, err := f.WriteBlob(p); err != nil {
							t.Error(err)
							return
						}
						rec, _ = blobio.AppendHeader(nil, len(p), blobio.None)
					}
					mu.Lock()
					mirror = append(append(mirror, rec...), p...)
					mu.Unlock()
					if i%1000 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			})
			var reads, bytesChecked int64
			var rmu sync.Mutex
			for g := range 3 {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 7))
					buf := make([]byte, 16<<10)
					for {
						select {
						case <-stop:
							return
						default:
						}
						mu.RLock()
						size := len(mirror)
						mu.RUnlock()
						if size == 0 {
							continue
						}
						n := 1 + r.IntN(min(size, len(buf)))
						off := size - n - r.IntN(min(size-n+1, 4096)) // near the tail
						if r.IntN(4) == 0 {
							off = r.IntN(size - n + 1) // anywhere
						}
						k, err := f.ReadAt(buf[:n], int64(off))
						if err != nil || k != n {
							t.Errorf("ReadAt(%d, %d) = %d, %v", n, off, k, err)
							return
						}
						mu.RLock()
						ok := bytes.Equal(buf[:n], mirror[off:off+n])
						mu.RUnlock()
						if !ok {
							t.Errorf("ReadAt(%d, %d) differs from what was written", n, off)
							return
						}
						rmu.Lock()
						reads++
						bytesChecked += int64(n)
						rmu.Unlock()
					}
				})
			}
			wg.Wait()
			t.Logf("%d reads, %d bytes checked, file of %d bytes", reads, bytesChecked, f.Size())
			assert.Positive(t, reads)
		})
	}
}

// TestSharedPoolBudget runs many files on one pool: the budget is never
// exceeded, Create waits for a buffer instead, and Close returns them.
func TestSharedPoolBudget(t *testing.T) {
	dir := testenv.Dir(t)
	pool, err := aligned.NewPool(8<<10, 4096, 5*(8<<10))
	require.NoError(t, err)
	defer pool.Close()

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 5 {
				f, err := ephemeral.Create(dir, &ephemeral.Options{Pool: pool, Buffers: 2})
				if err != nil {
					t.Error(err)
					return
				}
				p := bytes.Repeat([]byte{byte(g)}, 1000)
				for range 50 {
					if _, err := f.Write(p); err != nil {
						t.Error(err)
					}
				}
				got := make([]byte, 1000)
				if _, err := f.ReadAt(got, int64(i*100)); err != nil || !bytes.Equal(got, p) {
					t.Errorf("read back: %v", err)
				}
				if err := f.Close(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	st := pool.Stats()
	assert.LessOrEqual(t, st.HighWater, 5)
	assert.Zero(t, st.InUse)
	testenv.RequireEmpty(t, dir)

	// With the budget held, Create waits until a buffer comes back.
	held, err := pool.Get(context.Background())
	require.NoError(t, err)
	var others []*aligned.Buffer
	for range 4 {
		b, err := pool.Get(context.Background())
		require.NoError(t, err)
		others = append(others, b)
	}
	created := make(chan *ephemeral.File)
	go func() {
		f, err := ephemeral.Create(dir, &ephemeral.Options{Pool: pool})
		assert.NoError(t, err)
		created <- f
	}()
	select {
	case <-created:
		t.Fatal("Create went past the pool's budget")
	case <-time.After(50 * time.Millisecond):
	}
	pool.Put(held)
	f := <-created
	require.NoError(t, f.Close())
	for _, b := range others {
		pool.Put(b)
	}
}

// TestGoneAfterKill kills a child holding an ephemeral file with SIGKILL:
// the directory never shows the file, before or after.
func TestGoneAfterKill(t *testing.T) {
	if testenv.Child() == "hold" {
		f, err := ephemeral.Create(os.Getenv("DIO_EPHEMERAL_DIR"), nil)
		require.NoError(t, err)
		for range 1000 {
			_, err := f.Write(make([]byte, 1000))
			require.NoError(t, err)
		}
		fmt.Println("ready")
		time.Sleep(time.Minute)
		return
	}
	dir := testenv.Dir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestGoneAfterKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), testenv.ChildEnv+"=hold", "DIO_EPHEMERAL_DIR="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line := make([]byte, 6)
	_, err = io.ReadFull(out, line)
	require.NoError(t, err)
	require.Equal(t, "ready\n", string(line))
	testenv.RequireEmpty(t, dir)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	testenv.RequireEmpty(t, dir)
}

// aheadCounter counts the reads the file's readers perform, and those of a
// whole read buffer (512 KiB): the sequential window's, which come from
// the background once it is that large.
type aheadCounter struct {
	mu    sync.Mutex
	reads int
	full  int
	delay time.Duration
}

func (c *aheadCounter) Inject(op direct.Op, off int64, n int) (direct.Fault, bool) {
	if op != direct.OpRead {
		return direct.Fault{}, false
	}
	c.mu.Lock()
	c.reads++
	if n == 512<<10 {
		c.full++
	}
	c.mu.Unlock()
	return direct.Fault{Delay: c.delay}, c.delay > 0
}

func (c *aheadCounter) count() (reads, full int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads, c.full
}

// TestSequentialReadAhead scans a file blob by blob while, and after, it is
// written, with random reads and a Close breaking into the read-ahead: every
// blob reads back, the scan is served by background reads, and nothing
// leaks.
func TestSequentialReadAhead(t *testing.T) {
	for _, p := range testenv.Policies() {
		for _, delay := range []time.Duration{0, 200 * time.Microsecond} {
			t.Run(fmt.Sprintf("%v/delay=%v", p, delay), func(t *testing.T) {
				goroutines := runtime.NumGoroutine()
				counter := &aheadCounter{delay: delay}
				f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: p, BufferSize: 8 << 10, Buffers: 4, Faults: counter})
				require.NoError(t, err)
				var offs []int64
				var blobs [][]byte
				r := rand.New(rand.NewPCG(9, 9))
				for i := range 30000 {
					b := make([]byte, r.IntN(400))
					for j := range b {
						b[j] = byte(i ^ j)
					}
					off, err := f.WriteBlob(b)
					require.NoError(t, err)
					offs, blobs = append(offs, off), append(blobs, b)
					if i%7 == 0 { // a reader chasing the writer
						k := len(offs) - 1 - r.IntN(min(len(offs), 50))
						got, err := f.ReadBlob(offs[k], nil)
						require.NoError(t, err)
						require.True(t, bytes.Equal(blobs[k], got), "blob %d", k)
					}
				}
				var got []byte
				for k := range offs {
					got, err = f.ReadBlob(offs[k], got)
					require.NoError(t, err)
					require.True(t, bytes.Equal(blobs[k], got), "blob %d at %d", k, offs[k])
					if k%5000 == 4999 { // a random read drops the read-ahead
						j := r.IntN(len(offs))
						other, err := f.ReadBlob(offs[j], nil)
						require.NoError(t, err)
						require.True(t, bytes.Equal(blobs[j], other), "blob %d", j)
					}
				}
				// Read buffers are 512 KiB: the scan reads most of the
				// file in whole ones, and not many reads more.
				reads, full := counter.count()
				assert.GreaterOrEqual(t, full, int(f.Size()/(512<<10)/2), "the scan should be read ahead")
				assert.Less(t, reads, 3*full+50, "the scan should be read ahead")
				// Stop mid-scan, with a read-ahead likely in flight.
				for k := range len(offs) / 2 {
					got, err = f.ReadBlob(offs[k], got)
					require.NoError(t, err)
				}
				require.NoError(t, f.Close())
				testenv.WaitGoroutines(t, goroutines)
				reads, full = counter.count()
				t.Logf("%d blobs, %d bytes, %d reads, %d of 512 KiB", len(offs), f.Size(), reads, full)
			})
		}
	}
}

// TestScanKeepsReadAhead: a scan of blobs whose headers sit just before
// the read buffers' boundaries (2-byte blobs, 3-byte records: 2^19 mod 3
// is 2, so two boundaries in three fall inside a header read) is still
// served by background reads after the first few.
func TestScanKeepsReadAhead(t *testing.T) {
	if testenv.RejectsDirect() {
		t.Skip("the read-ahead counted here runs on the direct queue")
	}
	counter := &aheadCounter{}
	f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: fallback.Direct, Faults: counter})
	require.NoError(t, err)
	defer f.Close()
	const size = 3 << 20
	var stream []byte
	for len(stream) < size {
		stream, _ = blobio.AppendHeader(stream, 2, blobio.None)
		stream = append(stream, byte(len(stream)), byte(len(stream)>>8))
	}
	_, err = f.Write(stream)
	require.NoError(t, err)
	require.NoError(t, f.Flush())
	var got []byte
	for off := int64(0); off < int64(len(stream)); off += 3 {
		got, err = f.ReadBlob(off, got)
		require.NoError(t, err)
		require.Equal(t, stream[off+1:off+3], got, "blob at %d", off)
	}
	// Sequential reads grow 64, 128, 256 KiB, then 512 KiB ones come
	// from the background, up to the buffers still in memory at the end:
	// a window lost at a boundary would restart the growth, in more and
	// smaller reads.
	chunks := (len(stream) - (1 << 20)) / (512 << 10)
	reads, full := counter.count()
	assert.GreaterOrEqual(t, full, chunks-1, "read-ahead lost on the way")
	assert.LessOrEqual(t, reads, full+5, "read-ahead lost on the way")
}
