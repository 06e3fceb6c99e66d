package ephemeral_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
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

// stressEnv names the environment variable that makes TestReadersBesideWriter
// run longer: DIO_STRESS_SECONDS=60 runs it a minute per policy.
const stressEnv = "DIO_STRESS_SECONDS"

func stressDuration(t *testing.T, d time.Duration) time.Duration {
	if s := os.Getenv(stressEnv); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, stressEnv)
		return time.Duration(n) * time.Second
	}
	return d
}

// pattern fills p with the bytes a test writes at off: each position has
// its own value, so a byte read from the wrong place, or a stale or
// padded block, shows.
func pattern(p []byte, off int64) []byte {
	for i := range p {
		x := uint64(off) + uint64(i)
		p[i] = byte(x ^ x>>8 ^ x>>16 ^ 0x5a)
	}
	return p
}

// ackLog is what a writer acknowledged: the file's bytes and its blobs,
// published to readers by atomic lengths, so that readers check against it
// without a lock (the writer only writes past what it published).
type ackLog struct {
	data  []byte
	size  atomic.Int64
	offs  []int64
	blobs atomic.Int64
}

// TestReadersBesideWriter runs 16 readers doing random ReadAt and ReadBlob
// on acknowledged offsets, near the tail (in memory, in flight, across the
// refit block) and anywhere (on disk), checking every byte, while a writer
// appends blobs and raw bytes and flushes now and then; then Close breaks
// in. Run it under -race.
func TestReadersBesideWriter(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			goroutines := runtime.NumGoroutine()
			f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: p, BufferSize: 16 << 10, Buffers: 4})
			require.NoError(t, err)
			const maxSize = 48 << 20
			log := &ackLog{data: make([]byte, maxSize), offs: make([]int64, maxSize/16)}
			deadline := time.Now().Add(stressDuration(t, 1500*time.Millisecond))

			var wg sync.WaitGroup
			var reads, blobReads, flushes atomic.Int64
			writerDone := make(chan struct{})
			wg.Go(func() {
				defer close(writerDone)
				r := rand.New(rand.NewPCG(1, 1))
				buf := make([]byte, 6000)
				var size int64
				for i := 0; time.Now().Before(deadline); i++ {
					if size > maxSize-int64(len(buf))-blobio.MaxHeaderSize || log.blobs.Load() == int64(len(log.offs)) {
						break
					}
					p := pattern(buf[:r.IntN(len(buf))], size)
					blob, blobOff := r.IntN(3) != 0, size
					if !blob {
						if _, err := f.Write(p); err != nil {
							t.Error(err)
							return
						}
					} else {
						off, err := f.WriteBlob(p)
						if err != nil {
							t.Error(err)
							return
						}
						if off != blobOff {
							t.Errorf("blob at %d, want %d", off, blobOff)
							return
						}
						hdr, _ := blobio.AppendHeader(nil, len(p), blobio.None)
						size += int64(copy(log.data[size:], hdr))
					}
					size += int64(copy(log.data[size:], p))
					log.size.Store(size)
					if blob {
						// Published after the size that covers it.
						log.offs[log.blobs.Load()] = blobOff
						log.blobs.Add(1)
					}
					if r.IntN(50) == 0 { // a padded tail, rewritten later
						if err := f.Flush(); err != nil {
							t.Error(err)
							return
						}
						flushes.Add(1)
					}
				}
			})
			for g := range 16 {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 2))
					buf := make([]byte, 64<<10)
					var blob []byte
					for {
						nblobs := log.blobs.Load() // first: the size covers them
						size := log.size.Load()
						if size == 0 || nblobs == 0 {
							runtime.Gosched()
							continue
						}
						if r.IntN(2) == 0 {
							i := r.Int64N(nblobs)
							if r.IntN(2) == 0 { // near the tail
								i = nblobs - 1 - r.Int64N(min(nblobs, 64))
							}
							off := log.offs[i]
							var err error
							blob, err = f.ReadBlob(off, blob)
							if errors.Is(err, ephemeral.ErrClosed) {
								return
							}
							hs, n, _, herr := blobio.DecodeHeader(log.data[off:min(off+blobio.MaxHeaderSize, size)])
							if err != nil || herr != nil || !bytes.Equal(blob, log.data[off+int64(hs):off+int64(hs)+int64(n)]) {
								t.Errorf("ReadBlob(%d) = %d bytes, %v; want %d bytes", off, len(blob), err, n)
								return
							}
							blobReads.Add(1)
							continue
						}
						n := 1 + r.Int64N(min(size, int64(len(buf))))
						off := r.Int64N(size - n + 1)
						if r.IntN(2) == 0 { // near the tail
							off = size - n - r.Int64N(min(size-n+1, 32<<10))
						}
						k, err := f.ReadAt(buf[:n], off)
						if errors.Is(err, ephemeral.ErrClosed) {
							return
						}
						if err != nil || int64(k) != n || !bytes.Equal(buf[:n], log.data[off:off+n]) {
							t.Errorf("ReadAt(%d bytes at %d) = %d, %v, or differs from what was written", n, off, k, err)
							return
						}
						reads.Add(1)
					}
				})
			}
			<-writerDone
			time.Sleep(20 * time.Millisecond) // readers at work on the last of it
			require.NoError(t, f.Close())     // breaks into the readers
			wg.Wait()
			t.Logf("%d bytes written, %d flushes, %d ReadAt and %d ReadBlob checked", log.size.Load(), flushes.Load(), reads.Load(), blobReads.Load())
			assert.Positive(t, reads.Load())
			assert.Positive(t, blobReads.Load())
			testenv.WaitGoroutines(t, goroutines)
		})
	}
}

// gate holds the engine's calls of one operation, once armed, until
// released: a device that takes as long as the test likes. held receives
// the offset and length of each call it holds.
type gate struct {
	op      direct.Op
	armed   atomic.Bool
	held    chan [2]int64
	release chan struct{}
	once    sync.Once
}

func newGate(op direct.Op) *gate {
	return &gate{op: op, held: make(chan [2]int64, 64), release: make(chan struct{})}
}

func (g *gate) Inject(op direct.Op, off int64, n int) (direct.Fault, bool) {
	if op == g.op && g.armed.Load() {
		select {
		case g.held <- [2]int64{off, int64(n)}:
		default:
		}
		<-g.release
	}
	return direct.Fault{}, false
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// within fails t unless fn returns within d.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still waiting after %v", what, d)
	}
}

// writePattern appends n pattern bytes to f.
func writePattern(t *testing.T, f *ephemeral.File, n int) {
	t.Helper()
	p := pattern(make([]byte, n), f.Size())
	k, err := f.Write(p)
	require.NoError(t, err)
	require.Equal(t, n, k)
}

// checkRange fails t unless f's bytes [off, off+n) are the pattern.
func checkRange(t *testing.T, f *ephemeral.File, off int64, n int) {
	t.Helper()
	got := make([]byte, n)
	k, err := f.ReadAt(got, off)
	require.NoError(t, err)
	require.Equal(t, n, k)
	require.True(t, bytes.Equal(pattern(make([]byte, n), off), got), "[%d, %d) differs from what was written", off, off+int64(n))
}

// TestSlowReadDoesNotBlockWriter holds a reader's device read: meanwhile
// the writer appends megabytes, flushes and syncs, and other readers read
// what is in memory.
func TestSlowReadDoesNotBlockWriter(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			g := newGate(direct.OpRead)
			f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: p, BufferSize: 16 << 10, Buffers: 4, Faults: g})
			require.NoError(t, err)
			defer func() {
				g.open() // first: a failed test must not hang in Close
				f.Close()
			}()
			writePattern(t, f, 2<<20)
			require.NoError(t, f.Flush()) // [0, 2 MiB - 64 KiB) is on disk alone

			g.armed.Store(true)
			slow := make(chan error, 1)
			go func() {
				got := make([]byte, 4096)
				_, err := f.ReadAt(got, 4096)
				if err == nil && !bytes.Equal(got, pattern(make([]byte, 4096), 4096)) {
					err = errors.New("the slow read got the wrong bytes")
				}
				slow <- err
			}()
			select {
			case <-g.held:
			case <-time.After(10 * time.Second):
				t.Fatal("the read never reached the device")
			}
			within(t, 10*time.Second, "the writer beside a held read", func() {
				writePattern(t, f, 8<<20)
				_, err := f.WriteBlob([]byte("beside a slow reader"))
				assert.NoError(t, err)
				assert.NoError(t, f.Flush())
				assert.NoError(t, f.Sync())
			})
			within(t, 10*time.Second, "a read of memory beside a held read", func() {
				checkRange(t, f, 10<<20-30000, 30000) // still in the buffers
				assert.Equal(t, int64(10<<20+21), f.Size())
			})
			select {
			case err := <-slow:
				t.Fatalf("the held read returned early: %v", err)
			default:
			}
			g.open()
			require.NoError(t, <-slow)
		})
	}
}

// TestSlowWriteDoesNotBlockReaders holds the writer's device writes: the
// writer waits for its buffers, and meanwhile readers read bytes on disk,
// in the buffers being written, and in the buffer being filled.
func TestSlowWriteDoesNotBlockReaders(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			g := newGate(direct.OpWrite)
			f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: p, BufferSize: 16 << 10, Buffers: 4, Faults: g})
			require.NoError(t, err)
			defer func() {
				g.open() // first: a failed test must not hang in Close
				f.Close()
			}()
			writePattern(t, f, 1<<20+1000)
			require.NoError(t, f.Flush())

			g.armed.Store(true)
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				writePattern(t, f, 4<<20) // more than the buffers hold: waits for the held writes
			}()
			var held [2]int64
			select {
			case held = <-g.held:
			case <-time.After(10 * time.Second):
				t.Fatal("no write reached the device")
			}
			time.Sleep(20 * time.Millisecond) // the writer waits for a buffer now
			within(t, 10*time.Second, "readers beside a held write", func() {
				checkRange(t, f, 0, 64<<10) // on disk
				size := f.Size()
				// The held write's bytes, from memory: on the pwrite engine
				// they are not on the disk yet.
				checkRange(t, f, held[0], int(min(held[1], size-held[0])))
				checkRange(t, f, size-5000, 5000) // the buffer being filled
				blobOff := int64(1 << 20)         // a blob that is not: the pattern decodes as some header
				_, err := f.ReadBlob(blobOff, nil)
				if err != nil {
					assert.NotErrorIs(t, err, ephemeral.ErrClosed)
				}
			})
			select {
			case <-wrote:
				t.Fatal("the writer did not wait for the held write: the test proved nothing")
			default:
			}
			g.open()
			<-wrote
			checkRange(t, f, 0, int(f.Size()))
		})
	}
}

// TestReadsAcrossRefit reads the tail block while the padded copy Flush
// wrote is on disk and while its rewrite is in flight: the bytes come from
// memory, never from the stale block.
func TestReadsAcrossRefit(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			g := newGate(direct.OpWrite)
			f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: p, BufferSize: 8 << 10, Buffers: 2, Faults: g})
			require.NoError(t, err)
			defer func() {
				g.open() // first: a failed test must not hang in Close
				f.Close()
			}()
			writePattern(t, f, 100)
			require.NoError(t, f.Flush()) // the block on disk: 100 bytes, then zeros
			writePattern(t, f, 3000)
			checkRange(t, f, 0, 3100)

			g.armed.Store(true)
			flushed := make(chan error, 1)
			go func() { flushed <- f.Flush() }() // rewrites the block
			select {
			case <-g.held:
			case <-time.After(10 * time.Second):
				t.Fatal("the rewrite never reached the device")
			}
			within(t, 10*time.Second, "a read of the block being rewritten", func() {
				checkRange(t, f, 0, 3100)
				checkRange(t, f, 50, 3050)
			})
			g.open()
			require.NoError(t, <-flushed)
			checkRange(t, f, 0, 3100)
			// Past the buffers, the block is read back from the disk.
			writePattern(t, f, 64<<10)
			checkRange(t, f, 0, int(f.Size()))
		})
	}
}

// TestReadAtEOF checks ReadAt against io.ReaderAt's contract, through
// io.SectionReader and iotest, with a section longer than the file, and at
// and past the end by hand.
func TestReadAtEOF(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: p, BufferSize: 8 << 10, Buffers: 2})
			require.NoError(t, err)
			defer f.Close()
			writePattern(t, f, 100<<10+17) // most of it on disk
			size := f.Size()
			want := pattern(make([]byte, size), 0)
			// Not a Seeker: the section's end is past the file's.
			sr := io.NewSectionReader(f, 0, size+1<<20)
			require.NoError(t, iotest.TestReader(struct {
				io.Reader
				io.ReaderAt
			}{sr, sr}, want))

			for _, c := range []struct {
				off     int64
				n, want int
			}{{size - 10, 20, 10}, {size, 1, 0}, {size + 5, 1, 0}, {0, int(size) + 1, int(size)}, {size - 1, 1, 1}, {size + 1, 0, 0}} {
				got := make([]byte, c.n)
				k, err := f.ReadAt(got, c.off)
				assert.Equal(t, c.want, k, "ReadAt(%d bytes at %d)", c.n, c.off)
				if k < c.n {
					assert.ErrorIs(t, err, io.EOF, "ReadAt(%d bytes at %d)", c.n, c.off)
				} else {
					assert.NoError(t, err, "ReadAt(%d bytes at %d)", c.n, c.off)
				}
				assert.Equal(t, want[min(c.off, size):min(c.off, size)+int64(k)], got[:k])
			}
		})
	}
}

// TestLyingHeaderAllocatesLittle: a header claiming 0x0fffffff bytes in a
// file of 1 KiB fails without allocating for the claim.
func TestLyingHeaderAllocatesLittle(t *testing.T) {
	f, err := ephemeral.Create(testenv.Dir(t), nil)
	require.NoError(t, err)
	defer f.Close()
	data := make([]byte, 1024)
	copy(data[100:], []byte{0x8f, 0xff, 0xff, 0xff}) // uncompressed, 0x0fffffff bytes
	_, err = f.Write(data)
	require.NoError(t, err)
	for _, flush := range []bool{false, true} { // from memory, then from disk too
		if flush {
			require.NoError(t, f.Flush())
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = f.ReadBlob(100, nil)
		runtime.ReadMemStats(&after)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated for a lying header")
	}
}

// TestRandomReadersKeepSequentialWindow scans a file while random readers
// read it: the scan still reads whole 512 KiB buffers, most of them in the
// background, as it does alone.
func TestRandomReadersKeepSequentialWindow(t *testing.T) {
	counter := &aheadCounter{}
	f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{Faults: counter})
	require.NoError(t, err)
	defer f.Close()
	var offs []int64
	var lens []int
	r := rand.New(rand.NewPCG(3, 3))
	for f.Size() < 8<<20 {
		n := 100 + r.IntN(300)
		off, err := f.WriteBlob(pattern(make([]byte, n), 0))
		require.NoError(t, err)
		offs, lens = append(offs, off), append(lens, n)
	}
	require.NoError(t, f.Flush())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var random atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 4))
			var blob []byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if blob, err = f.ReadBlob(offs[r.IntN(len(offs))], blob); err != nil {
					t.Error(err)
					return
				}
				random.Add(1)
			}
		})
	}
	time.Sleep(10 * time.Millisecond)
	var blob []byte
	for i, off := range offs {
		blob, err = f.ReadBlob(off, blob)
		require.NoError(t, err)
		require.True(t, bytes.Equal(pattern(make([]byte, lens[i]), 0), blob), "blob %d", i)
	}
	close(stop)
	wg.Wait()
	reads, full := counter.count()
	t.Logf("%d random reads beside the scan; %d device reads, %d of 512 KiB", random.Load(), reads, full)
	assert.GreaterOrEqual(t, full, (7<<20)/(512<<10)*3/4, "random readers took the scan's window")
}

// TestCreateRefusesBadOptions: Options no file can use fail with
// ErrInvalidOptions and leave nothing in the directory.
func TestCreateRefusesBadOptions(t *testing.T) {
	dir := testenv.Dir(t)
	tiny, err := aligned.NewPool(1000, 8, 4000) // fits no O_DIRECT file
	require.NoError(t, err)
	defer tiny.Close()
	for _, c := range []struct {
		name string
		o    ephemeral.Options
		ok   bool // accepted anyway
	}{
		{"Buffers=-1", ephemeral.Options{Buffers: -1}, false},
		{"BufferSize=-4096", ephemeral.Options{BufferSize: -4096}, false},
		{"IO=99", ephemeral.Options{IO: fallback.Policy(99)}, false},
		{"Pool/direct", ephemeral.Options{Pool: tiny, IO: fallback.Direct}, false},
		{"Pool/direct+pwrite", ephemeral.Options{Pool: tiny, IO: fallback.DirectPwrite}, false},
		{"Pool/auto", ephemeral.Options{Pool: tiny}, testenv.RejectsDirect()}, // the page cache takes any buffer
		{"Pool/std-fs", ephemeral.Options{Pool: tiny, IO: fallback.StdFS}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := ephemeral.Create(dir, &c.o)
			if c.ok {
				require.NoError(t, err)
				require.NoError(t, f.Close())
			} else {
				assert.ErrorIs(t, err, ephemeral.ErrInvalidOptions)
				assert.Nil(t, f)
			}
			testenv.RequireEmpty(t, dir)
		})
	}
}

// TestClosedErrors: every method of a closed File fails with an error
// matching both ErrClosed and fs.ErrClosed.
func TestClosedErrors(t *testing.T) {
	f, err := ephemeral.Create(testenv.Dir(t), nil)
	require.NoError(t, err)
	_, err = f.WriteBlob([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	calls := map[string]func() error{
		"Write":     func() error { _, err := f.Write([]byte("x")); return err },
		"WriteBlob": func() error { _, err := f.WriteBlob([]byte("x")); return err },
		"ReadAt":    func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err },
		"ReadBlob":  func() error { _, err := f.ReadBlob(0, nil); return err },
		"Flush":     f.Flush,
		"Sync":      f.Sync,
		"Close":     f.Close,
	}
	for name, call := range calls {
		err := call()
		assert.ErrorIs(t, err, ephemeral.ErrClosed, name)
		assert.ErrorIs(t, err, fs.ErrClosed, name)
	}
	assert.Equal(t, int64(2), f.Size(), "Size after Close")
}

func ExampleFile_ReadAt() {
	f, err := ephemeral.Create(os.TempDir(), nil)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	// Readers may run beside the writer: each read takes the bytes from
	// memory or the disk, wherever they are.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			f.ReadAt(make([]byte, 10), 0)
		})
	}
	for range 1000 {
		f.Write([]byte("0123456789"))
	}
	wg.Wait()
	got := make([]byte, 10)
	_, err = f.ReadAt(got, 9990)
	fmt.Println(string(got), err)
	// Output: 0123456789 <nil>
}

// TestCreateContext: Create on a spent Pool waits for its first buffer
// only as long as Options.Context allows, and leaves nothing behind.
func TestCreateContext(t *testing.T) {
	dir := testenv.Dir(t)
	pool, err := aligned.NewPool(64<<10, 4096, 64<<10) // one buffer
	require.NoError(t, err)
	defer pool.Close()
	held, err := pool.Get(context.Background())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	f, err := ephemeral.Create(dir, &ephemeral.Options{Pool: pool, Context: ctx})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Nil(t, f)
	testenv.RequireEmpty(t, dir)

	// With the buffer back, a waiting Create gets it.
	go func() { time.Sleep(20 * time.Millisecond); pool.Put(held) }()
	f, err = ephemeral.Create(dir, &ephemeral.Options{Pool: pool, Context: context.Background()})
	require.NoError(t, err)
	_, err = f.WriteBlob([]byte("after the wait"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, 0, pool.Stats().InUse, "the pool is whole again")
}

// TestReadBlobCorruptOffset: a corrupt header is a *blobio.CorruptError at
// the blob's offset in the file, where a caller could cut.
func TestReadBlobCorruptOffset(t *testing.T) {
	f, err := ephemeral.Create(testenv.Dir(t), nil)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write([]byte{2, 'o', 'k', 0xa0, 0, 0, 1, 0x90, 0, 0, 1, 7})
	require.NoError(t, err)
	for _, off := range []int64{3, 7} {
		_, err := f.ReadBlob(off, nil)
		var ce *blobio.CorruptError
		require.ErrorAs(t, err, &ce, "at %d", off)
		assert.Equal(t, off, ce.Off, "%v", err)
		assert.ErrorIs(t, err, blobio.ErrCorrupt)
	}
}
