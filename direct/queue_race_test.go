package direct_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// stressEnv sets how long the stress tests run, as a time.Duration
// ("20s"); by default they run 3 s, and 1 s with -short.
const stressEnv = "DIO_STRESS"

func stressTime(t *testing.T) time.Duration {
	if s := os.Getenv(stressEnv); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, stressEnv)
		return d
	}
	if testing.Short() {
		return time.Second
	}
	return 3 * time.Second
}

// hangLimit is how long one step of a stress test may take before the
// watchdog calls it a hang: far beyond any I/O of these tests, even under
// -race on a loaded machine.
const hangLimit = 30 * time.Second

// watchdog panics with every goroutine's stack unless stop is called
// within hangLimit: a hang fails the test binary with the evidence
// instead of stalling CI until go test's own timeout.
func watchdog(what string) (stop func() bool) {
	t := time.AfterFunc(hangLimit, func() {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		panic(fmt.Sprintf("%s: no progress in %v; goroutines:\n%s", what, hangLimit, buf))
	})
	return t.Stop
}

// TestQueueSubmitCloseStress races Close against Submit and Await, on a
// new queue each round: two submitters loop on 4 KiB writes until Submit
// refuses, while Close comes at a random moment. Close must return (on
// 21bdc14 io_uring's Close hung within a few hundred rounds, waiting for a
// refused Submit's slot), and every accepted request must come back with
// its own Token.
func TestQueueSubmitCloseStress(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			f := openOrSkip(t, filepath.Join(testenv.Dir(t), "s"), os.O_RDWR|os.O_CREATE)
			defer f.Close()
			blk := alignedBlocks(t, f, 2, 1)
			n := f.Alignment().Block()
			end := time.Now().Add(stressTime(t))
			rounds := 0
			for ; time.Now().Before(end); rounds++ {
				stop := watchdog(fmt.Sprintf("%v round %d", kind, rounds))
				q, err := f.NewQueue(&direct.QueueOptions{Depth: 1 + rounds%2, Engine: kind})
				require.NoError(t, err)
				var wg sync.WaitGroup
				errs := make(chan error, 2)
				for w := range 2 {
					wg.Go(func() {
						done := make(chan direct.Completion, 1)
						for tok := uint64(1); ; tok++ {
							r := direct.Request{Op: direct.OpWrite, Buf: blk[w*n : (w+1)*n], Off: int64(w * n), Token: tok, Done: done}
							if err := q.Submit(r); err != nil {
								if err != direct.ErrQueueClosed {
									errs <- err
								}
								return
							}
							c := q.Await(done)
							if c.Token != tok || c.Op != direct.OpWrite || c.Err != nil {
								errs <- fmt.Errorf("completion %+v for token %d", c, tok)
								return
							}
						}
					})
				}
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				require.NoError(t, q.Close())
				wg.Wait()
				stop()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
			}
			t.Logf("%d rounds", rounds)
		})
	}
}

// TestQueueCloseRacesAwait: goroutines with requests outstanding wait in
// Await while Close runs; each gets its own Completions (never a made-up
// Token 0), and an Await with nothing left outstanding on the closed queue
// returns ErrQueueClosed instead of blocking.
func TestQueueCloseRacesAwait(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			f := openOrSkip(t, filepath.Join(testenv.Dir(t), "a"), os.O_RDWR|os.O_CREATE)
			defer f.Close()
			const users, each = 4, 2
			n := f.Alignment().Block()
			blk := alignedBlocks(t, f, users*each, 1)
			end := time.Now().Add(stressTime(t) / 2)
			for round := 0; time.Now().Before(end); round++ {
				stop := watchdog(fmt.Sprintf("%v round %d", kind, round))
				q, err := f.NewQueue(&direct.QueueOptions{Depth: users * each, Engine: kind})
				require.NoError(t, err)
				var wg sync.WaitGroup
				errs := make(chan error, users)
				for u := range users {
					done := make(chan direct.Completion, each)
					for k := range each {
						i := u*each + k
						require.NoError(t, q.Submit(direct.Request{Op: direct.OpRead, Buf: blk[i*n : (i+1)*n], Off: int64(i * n), Token: uint64(i + 1), Done: done}))
					}
					wg.Go(func() {
						seen := map[uint64]bool{}
						for range each {
							c := q.Await(done)
							if c.Op != direct.OpRead || c.Token < uint64(u*each+1) || c.Token > uint64(u*each+each) || seen[c.Token] {
								errs <- fmt.Errorf("user %d: completion %+v", u, c)
								return
							}
							seen[c.Token] = true
						}
						if c := q.Await(done); c.Op != 0 || c.Err != direct.ErrQueueClosed {
							errs <- fmt.Errorf("user %d: Await with nothing outstanding after Close: %+v", u, c)
						}
					})
				}
				require.NoError(t, q.Close())
				wg.Wait()
				stop()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestQueueRefusesZeroAlignment: an Alignment with a zero field is refused
// by NewQueue (on 21bdc14 its first request divided by zero), and so is
// one that is not a power of two, which no kernel asks for.
func TestQueueRefusesZeroAlignment(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			f, err := os.Create(filepath.Join(testenv.Dir(t), "z"))
			require.NoError(t, err)
			defer f.Close()
			for _, a := range []direct.Alignment{{Memory: 512}, {Offset: 512}, {Memory: -1, Offset: 512}, {Memory: 3, Offset: 512}, {Memory: 512, Offset: 1536}} {
				q, err := direct.NewQueue(f, &direct.QueueOptions{Engine: kind, Alignment: a})
				require.ErrorIs(t, err, direct.ErrInvalidAlignment, "%v", a)
				assert.NotContains(t, err.Error(), "direct: direct:")
				assert.Nil(t, q)
			}
			q, err := direct.NewQueue(f, &direct.QueueOptions{Engine: kind, Alignment: direct.Alignment{Memory: 4, Offset: 512}})
			require.NoError(t, err, "NVMe's memory alignment can be 4")
			require.NoError(t, q.Close())
		})
	}
}

// TestQueueRefusesBadOptions: NewQueue refuses a nil file (on 3ebca94 it
// returned a queue whose first request dereferenced nil, on a worker
// goroutine with the pwrite engine, and whose Close then hung with
// io_uring) and a Depth over MaxDepth (the pwrite engine started a
// goroutine per unit: 2^30 of them asked the runtime for 60 GB); MaxDepth
// itself is taken.
func TestQueueRefusesBadOptions(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			q, err := direct.NewQueue(nil, &direct.QueueOptions{Engine: kind})
			require.ErrorIs(t, err, direct.ErrInvalidQueueOptions)
			assert.Nil(t, q)
			f, err := os.Create(filepath.Join(testenv.Dir(t), "d"))
			require.NoError(t, err)
			defer f.Close()
			q, err = direct.NewQueue(f, &direct.QueueOptions{Engine: kind, Depth: direct.MaxDepth + 1})
			require.ErrorIs(t, err, direct.ErrInvalidQueueOptions)
			assert.Nil(t, q)
			q, err = direct.NewQueue(f, &direct.QueueOptions{Engine: kind, Depth: direct.MaxDepth})
			require.NoError(t, err)
			assert.Equal(t, direct.MaxDepth, q.Depth())
			require.NoError(t, q.Close())
		})
	}
}

// TestFileCloseRacesIO closes a File while goroutines read and write it,
// through ReadAt/WriteAt and through queues of both engines, then opens a
// second file, which takes the freed descriptor number, while they go on.
// The I/O must fail with fs.ErrClosed and never reach the second file; on
// 21bdc14 every call took the number from Fd, unguarded.
func TestFileCloseRacesIO(t *testing.T) {
	dir := testenv.Dir(t)
	openOrSkip(t, filepath.Join(dir, "probe"), os.O_RDWR|os.O_CREATE).Close()
	type path struct {
		name string
		kind direct.EngineKind // 0: ReadAt and WriteAt
	}
	paths := []path{{name: "sync"}}
	for _, k := range engines(t) {
		paths = append(paths, path{name: k.String(), kind: k})
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			end := time.Now().Add(stressTime(t) / 2)
			for round := 0; time.Now().Before(end); round++ {
				stop := watchdog(fmt.Sprintf("%s round %d", p.name, round))
				closeRacesIO(t, dir, p.kind)
				stop()
			}
		})
	}
}

func closeRacesIO(t *testing.T, dir string, kind direct.EngineKind) {
	f := openOrSkip(t, filepath.Join(dir, "a"), os.O_RDWR|os.O_CREATE|os.O_TRUNC)
	n := f.Alignment().Block()
	ones := alignedBlocks(t, f, 1, 1)
	_, err := f.WriteAt(ones, 0) // something to read
	require.NoError(t, err)
	var q direct.Queue
	if kind != 0 {
		q, err = f.NewQueue(&direct.QueueOptions{Depth: 2, Engine: kind})
		require.NoError(t, err)
		defer q.Close()
	}
	stopIO := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := range 4 {
		buf := alignedBlocks(t, f, 1, 0)
		wg.Go(func() {
			done := make(chan direct.Completion, 1)
			for {
				select {
				case <-stopIO:
					errs <- nil
					return
				default:
				}
				var err error
				switch {
				case q != nil:
					op := direct.OpWrite
					if w%2 == 1 {
						op = direct.OpRead
					}
					b := ones
					if op == direct.OpRead {
						b = buf
					}
					if err = q.Submit(direct.Request{Op: op, Buf: b, Done: done}); err == nil {
						err = q.Await(done).Err
					}
				case w%2 == 0:
					_, err = f.WriteAt(ones, 0)
				default:
					_, err = f.ReadAt(buf, 0)
				}
				if err != nil {
					if !errorsIsClosed(err) {
						errs <- err
						return
					}
				}
			}
		})
	}
	time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
	require.NoError(t, f.Close())
	g := openOrSkip(t, filepath.Join(dir, "b"), os.O_RDWR|os.O_CREATE|os.O_TRUNC)
	defer g.Close()
	zeros := alignedBlocks(t, g, 1, 0)
	clear(zeros)
	_, err = g.WriteAt(zeros, 0)
	require.NoError(t, err)
	time.Sleep(time.Millisecond) // let the racing I/O run into the new file, if it can
	close(stopIO)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got := alignedBlocks(t, g, 1, 7)
	_, err = g.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(zeros[:n], got[:n]), "I/O on the closed file reached the file that reused its descriptor")
}

func errorsIsClosed(err error) bool {
	return err != nil && (errors.Is(err, fs.ErrClosed) || errors.Is(err, direct.ErrQueueClosed))
}

// TestQueueLateFaultStallsNothing: a request delayed by a Late fault must
// not hold up the queue's other requests; on 21bdc14 the io_uring reaper
// slept the delay holding the queue's lock.
func TestQueueLateFaultStallsNothing(t *testing.T) {
	const delay = 2 * time.Second
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			plan := faults.NewPlan(faults.Late(direct.OpWrite, 1, delay))
			f, q := faultQueue(t, kind, 2, plan)
			n := f.Alignment().Block()
			blk := alignedBlocks(t, f, 2, 1)
			done := make(chan direct.Completion, 2)
			start := time.Now()
			for i := range 2 {
				require.NoError(t, q.Submit(direct.Request{Op: direct.OpWrite, Buf: blk[i*n : (i+1)*n], Off: int64(i * n), Token: uint64(i + 1), Done: done}))
			}
			first := q.Await(done)
			fast := time.Since(start)
			second := q.Await(done)
			slow := time.Since(start)
			require.NoError(t, first.Err)
			require.NoError(t, second.Err)
			assert.ElementsMatch(t, []uint64{1, 2}, []uint64{first.Token, second.Token})
			assert.Less(t, fast, delay/2, "the request without a fault waited for the late one")
			assert.GreaterOrEqual(t, slow, delay, "the late one was not late")
			assert.Equal(t, 1, plan.Injected()["late"])
		})
	}
}
