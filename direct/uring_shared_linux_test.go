package direct_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/testenv"
)

// maxRings is direct's bound on the process's rings (min(GOMAXPROCS, 4)),
// restated: the tests check the code against the documented number.
const maxRings = 4

// TestURingSharedRings runs many files' queues at once, each goroutine
// keeping its queue full, and the sum of the depths above one ring's
// capacity: the requests of all of them are in flight together on a
// bounded number of rings, and none is lost.
func TestURingSharedRings(t *testing.T) {
	_, _ = uringFile(t, 1)                       // skips without io_uring
	const files, queuesPerFile, depth = 16, 5, 4 // 320 requests: more than a ring's 256 slots
	before := direct.RingsCreated()
	dir := testenv.Dir(t)
	type user struct {
		q    direct.Queue
		bufs []byte
		n    int
	}
	var users []user
	for i := range files {
		f := openOrSkip(t, filepath.Join(dir, fmt.Sprint(i)), os.O_RDWR|os.O_CREATE)
		t.Cleanup(func() { f.Close() })
		n := f.Alignment().Block()
		for range queuesPerFile {
			users = append(users, user{q: newQueue(t, f, direct.EngineURing, depth), bufs: alignedBlocks(t, f, depth, byte(i)), n: n})
		}
	}
	stop := watchdog("shared rings")
	defer stop()

	// One goroutine fills every queue before awaiting any: the ring runs
	// out of slots, and Submit must reap for room instead of failing.
	dones := make([]chan direct.Completion, len(users))
	for i, u := range users {
		dones[i] = make(chan direct.Completion, depth)
		for k := range depth {
			require.NoError(t, u.q.Submit(direct.Request{Op: direct.OpWrite, Buf: u.bufs[k*u.n : (k+1)*u.n], Off: int64(k * u.n), Token: uint64(k), Done: dones[i]}))
		}
	}
	for i, u := range users {
		seen := map[uint64]bool{}
		for range depth {
			c := u.q.Await(dones[i])
			require.NoError(t, c.Err)
			require.False(t, seen[c.Token], "token %d twice", c.Token)
			seen[c.Token] = true
		}
	}

	// Then a goroutine per queue, submitting and awaiting for a while.
	var wg sync.WaitGroup
	end := time.Now().Add(stressTime(t) / 3)
	for i, u := range users {
		wg.Go(func() {
			for k := uint64(0); time.Now().Before(end); k++ {
				r := direct.Request{Op: direct.OpRead, Buf: u.bufs[:u.n], Off: int64(k%depth) * int64(u.n), Token: k, Done: dones[i]}
				if !assert.NoError(t, u.q.Submit(r)) {
					return
				}
				if c := u.q.Await(dones[i]); !assert.NoError(t, c.Err) || !assert.Equal(t, k, c.Token) {
					return
				}
			}
		})
	}
	wg.Wait()
	created := direct.RingsCreated() - before
	assert.LessOrEqual(t, created, maxRings, "rings set up for %d queues", len(users))
	t.Logf("%d queues on %d files: %d rings set up", len(users), files, created)
}

// TestURingBrokenRingDeliversTokens breaks a shared ring while requests
// are in the kernel: each request still gets its own Completion, with its
// Token and the ring's error, on its Done channel, once the kernel is done
// with it; later Submits fail; Close returns; a new queue gets a working
// ring.
func TestURingBrokenRingDeliversTokens(t *testing.T) {
	f, q := uringFile(t, 8)
	n := 1 << 20 // long enough to be in the kernel still when the ring breaks
	blk := alignedBlocks(t, f, 8*n/f.Alignment().Block(), 1)
	stop := watchdog("broken ring")
	defer stop()
	dones := [2]chan direct.Completion{make(chan direct.Completion, 4), make(chan direct.Completion, 4)}
	for i := range 8 {
		require.NoError(t, q.Submit(direct.Request{Op: direct.OpWrite, Buf: blk[i*n : (i+1)*n], Off: int64(i * n), Token: uint64(100 + i), Done: dones[i%2]}))
	}
	broken := errors.New("injected: ring broken")
	direct.BreakRing(q, broken)
	start := time.Now()
	seen := map[uint64]bool{}
	for i := range 8 {
		c := q.Await(dones[i%2])
		require.ErrorIs(t, c.Err, broken)
		assert.Equal(t, direct.OpWrite, c.Op)
		assert.Equal(t, uint64(i%2), (c.Token-100)%2, "delivered to the wrong Done channel")
		assert.False(t, seen[c.Token], "token %d twice", c.Token)
		seen[c.Token] = true
	}
	assert.Len(t, seen, 8)
	// The drain waits for each request's CQE, at most 10 s: these writes
	// take microseconds, so a drain that long saw no CQE after the break.
	assert.Less(t, time.Since(start), 5*time.Second, "the drain waited out its limit instead of seeing the kernel finish")
	err := q.Submit(direct.Request{Op: direct.OpWrite, Buf: blk[:n], Done: dones[0]})
	require.ErrorIs(t, err, broken)
	assert.ErrorIs(t, q.Await(dones[0]).Err, broken, "Await with nothing outstanding on a broken ring")
	require.NoError(t, q.Close())

	q2 := newQueue(t, f, direct.EngineURing, 1)
	assert.False(t, direct.SameRing(q, q2), "a new queue got the broken ring")
	require.NoError(t, do(t, q2, direct.Request{Op: direct.OpWrite, Buf: blk[:n]}).Err)
}

// TestURingRefusesHugeRequest: an SQE's length is 32 bits; 21bdc14
// truncated longer requests silently.
func TestURingRefusesHugeRequest(t *testing.T) {
	f, q := uringFile(t, 1)
	b, err := aligned.New(f.Alignment().Block(), f.Alignment().Memory)
	require.NoError(t, err)
	defer b.Free()
	// A slice that claims 4 GiB + one block over memory it does not have:
	// the refusal must come before anything reads it.
	huge := unsafe.Slice(&b.Bytes()[0], 1<<32+f.Alignment().Block())
	done := make(chan direct.Completion, 1)
	err = q.Submit(direct.Request{Op: direct.OpWrite, Buf: huge, Done: done})
	require.ErrorIs(t, err, direct.ErrTooLarge)
	assert.Contains(t, err.Error(), "4294967295")
	require.NoError(t, do(t, q, direct.Request{Op: direct.OpWrite, Buf: b.Bytes()}).Err, "the queue works on")
}

// TestURingProbeOnce: the probe and every queue share the process's rings;
// URingError sets up nothing after the first call.
func TestURingProbeOnce(t *testing.T) {
	_, _ = uringFile(t, 1)
	before := direct.RingsCreated()
	for range 10 {
		require.NoError(t, direct.URingError())
	}
	assert.Equal(t, before, direct.RingsCreated())
}
