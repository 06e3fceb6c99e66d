package direct

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ownerFile makes a file of 256 KiB whose every byte is b, and a queue on
// u over it.
func ownerFile(t *testing.T, u *uring, b byte, depth int) (*uringQueue, *os.File) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	_, err = f.WriteAt(bytes.Repeat([]byte{b}, 256<<10), 0)
	require.NoError(t, err)
	return &uringQueue{u: u, x: newXfer(f, Alignment{Memory: 1, Offset: 1}, false), depth: depth, drained: make(chan struct{})}, f
}

func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// hammer runs fn(g, stop) in n goroutines for d (a fifth of it with
// -short), then sets stop and waits for them.
func hammer(d time.Duration, n int, fn func(g int, stop *atomic.Bool)) {
	if testing.Short() {
		d /= 5
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(g, &stop)
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
}

// queueChurn opens queues on u over a file of fill bytes, one after
// another until stop: each read by readers goroutines (readLoop, singly
// and in batches) for a pause drawn from [pause, 2*pause) and closed
// beside them. It adds their reads to reads, and counts in handed the
// queues that handed requests to the owner. prepare, if not nil, sets a
// queue up before its readers start.
func queueChurn(t *testing.T, u *uring, fill byte, readers int, lo, span time.Duration, prepare func(*uringQueue), stop *atomic.Bool, reads, handed *atomic.Int64) {
	for !stop.Load() {
		q, f := ownerFile(t, u, fill, 16)
		if prepare != nil {
			prepare(q)
		}
		var inner sync.WaitGroup
		for range readers {
			inner.Add(1)
			go func() {
				defer inner.Done()
				reads.Add(int64(readLoop(t, q, fill, true, stop)))
			}()
		}
		time.Sleep(lo + rand.N(span))
		u.mu.Lock()
		if q.dupped {
			handed.Add(1)
		}
		u.mu.Unlock()
		require.NoError(t, q.Close()) // beside the readers: their Submits fail, their requests complete
		inner.Wait()
		f.Close()
	}
}

// assertSettled checks u once every request is complete: every op slot
// free, no CQE owed but the wake-up NOP's, and as many descriptors open
// as fds. A late fault's timer sends its Completion before it pushes the
// NOP, so the test may see the NOP in the kernel with no one left to
// reap it (the next Await does): harmless, and no request's.
func assertSettled(t *testing.T, u *uring, fds int) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	assert.Equal(t, len(u.ops), len(u.free), "op slots left taken")
	owed := u.due()
	if u.nopQueued {
		owed--
	}
	assert.LessOrEqual(t, owed, 0, "CQEs owed with every request complete (inKernel %d, armed %v, read in %v)", u.inKernel, u.armed, u.armIn)
	assert.Equal(t, fds, openFds(t), "descriptors left open")
}

func ownerRing(t *testing.T) *uring {
	t.Helper()
	u, err := newURing()
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	t.Cleanup(func() {
		// The owner leaves once it has waited ownerLinger for nothing:
		// the ring must outlive it.
		deadline := time.Now().Add(5 * time.Second)
		for {
			u.mu.Lock()
			on := u.ownerOn
			u.mu.Unlock()
			if !on {
				break
			}
			if time.Now().After(deadline) {
				t.Error("the owner still holds the seat 5 s after the test")
				return // leave the ring open rather than close it under the owner
			}
			time.Sleep(time.Millisecond)
		}
		u.r.close()
	})
	if u.efd < 0 {
		t.Skip("no eventfd: no owner")
	}
	u.testOwner = true
	return u
}

// readLoop reads 4 KiB at random offsets of q, singly and (with batches)
// in batches of up to 4, until stop or until a Submit fails, checking that every byte
// read is want and that no request fails; it reports the requests
// completed.
func readLoop(t *testing.T, q *uringQueue, want byte, batches bool, stop *atomic.Bool) int {
	var dones [4]chan Completion
	var bufs [4][]byte
	for k := range dones {
		dones[k] = make(chan Completion, 1)
		bufs[k] = make([]byte, 4096)
	}
	n := 0
	for !stop.Load() {
		m := 1
		if batches {
			m += rand.IntN(4)
		}
		rs := make([]Request, m)
		for k := range m {
			rs[k] = Request{Op: OpRead, Buf: bufs[k], Off: rand.Int64N(63) * 4096, Token: uint64(k), Done: dones[k]}
		}
		var got int
		var err error
		if m == 1 {
			err = q.Submit(rs[0])
			if err == nil {
				got = 1
			}
		} else {
			got, err = q.SubmitBatch(rs)
		}
		if err != nil {
			return n
		}
		for k := range got {
			c := q.Await(dones[k])
			if !assert.NoError(t, c.Err, "an accepted request failed") {
				return n
			}
			if !assert.Equal(t, uint64(k), c.Token) || !assert.Equal(t, 4096, c.N) {
				return n
			}
			if bytes.Count(bufs[k], []byte{want}) != 4096 {
				t.Errorf("a read of the file of %q bytes read others", want)
				return n
			}
			n++
		}
	}
	return n
}

// TestURingOwnerStress: with the owner on, goroutines on three queues
// over three files submit singly and in batches and await, queues close
// and reopen beside them; every read returns its own file's bytes, every
// request completes, and the queues' own descriptors are closed with
// them.
func TestURingOwnerStress(t *testing.T) {
	u := ownerRing(t)
	fds := openFds(t)
	d := 2 * time.Second
	if testing.Short() {
		d = 300 * time.Millisecond
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads, handed atomic.Int64
	for k := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			queueChurn(t, u, byte('a'+k), 8, 20*time.Millisecond, 50*time.Millisecond, nil, &stop, &reads, &handed)
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	t.Logf("%d reads; %d queues handed requests to the owner", reads.Load(), handed.Load())
	assert.Positive(t, handed.Load(), "no request went to the owner")
	assertSettled(t, u, fds)
}

// TestURingOwnerFileClosed: a file closed while requests handed to the
// owner are on their way reads no other file's bytes: the SQEs name the
// queue's own descriptor, whose number no new file can take. Files with
// other bytes are opened right after the Close to take the number if it
// were free.
func TestURingOwnerFileClosed(t *testing.T) {
	u := ownerRing(t)
	// The owner waits before its enters while held: the SQEs handed to
	// it meanwhile go in after the Close.
	var held atomic.Bool
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		for toSubmit > 0 && flags&ioringEnterGetEvents != 0 && held.Load() {
			time.Sleep(100 * time.Microsecond)
		}
		return u.r.enterKernel(toSubmit, minComplete, flags)
	}
	for round := range 20 {
		q, f := ownerFile(t, u, 'a', 32)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				readLoop(t, q, 'a', false, &stop) // batches submit themselves, and whatever was pushed
			}()
		}
		time.Sleep(time.Duration(1+round%5) * time.Millisecond)
		held.Store(true)
		time.Sleep(5 * time.Millisecond)
		u.mu.Lock()
		pushed := u.r.sqLocalTail - *u.r.sqHead
		u.mu.Unlock()
		require.NoError(t, f.Close())
		var others []*os.File
		for range 4 {
			p := filepath.Join(t.TempDir(), "other")
			require.NoError(t, os.WriteFile(p, bytes.Repeat([]byte{'z'}, 256<<10), 0o644))
			o, err := os.Open(p)
			require.NoError(t, err)
			others = append(others, o)
		}
		t.Logf("%d SQEs pushed when the file closed", pushed)
		held.Store(false)
		stop.Store(true)
		wg.Wait()
		require.NoError(t, q.Close())
		for _, o := range others {
			o.Close()
		}
	}
}

// TestURingOwnerRefused: when the kernel refuses the owner's enter, the
// requests handed to it complete with the refusal (their Submits have
// returned), nothing is left counted, and the ring goes on.
func TestURingOwnerRefused(t *testing.T) {
	u := ownerRing(t)
	q, _ := ownerFile(t, u, 'a', 64)
	var refuse atomic.Int32
	// Whether the SQ holds a handed-off SQE: the owner's enters that
	// carry only its eventfd read are let through.
	handedPushed := func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		for p := atomic.LoadUint32(u.r.sqHead); p != u.r.sqLocalTail; p++ {
			d := u.r.sqes[u.r.sqArray[p&u.r.sqMask]].userData
			if d < uint64(len(u.ops)) && u.ops[d].handed {
				return true
			}
		}
		return false
	}
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		if toSubmit > 0 && flags&ioringEnterGetEvents != 0 && handedPushed() && refuse.Add(-1) >= 0 {
			return 0, syscall.ENOMEM
		}
		return u.r.enterKernel(toSubmit, minComplete, flags)
	}
	refuse.Store(3)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var refused atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan Completion, 1)
			buf := make([]byte, 4096)
			for !stop.Load() {
				if err := q.Submit(Request{Op: OpRead, Buf: buf, Done: done}); err != nil {
					require.ErrorIs(t, err, syscall.ENOMEM) // refused in its own enter
					refused.Add(1)
					continue
				}
				c := q.Await(done)
				if c.Err != nil {
					require.ErrorIs(t, c.Err, syscall.ENOMEM)
					refused.Add(1)
				}
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for refuse.Load() >= 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	assert.Negative(t, refuse.Load(), "the owner's enter was refused fewer times than scripted")
	assert.Positive(t, refused.Load())
	// The ring goes on.
	done := make(chan Completion, 1)
	require.NoError(t, q.Submit(Request{Op: OpRead, Buf: make([]byte, 4096), Token: 9, Done: done}))
	c := q.Await(done)
	require.NoError(t, c.Err)
	assert.Equal(t, uint64(9), c.Token)
	require.NoError(t, q.Close())
	u.mu.Lock()
	defer u.mu.Unlock()
	assert.Equal(t, len(u.ops), len(u.free))
	assert.Zero(t, q.pending)
}

// readUntilFails runs readers goroutines that read q with Submit and
// Await until a Submit or a Completion fails, which must be with want;
// the channel closes once every reader has stopped.
func readUntilFails(t *testing.T, q *uringQueue, readers int, want error) <-chan struct{} {
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			done := make(chan Completion, 1)
			buf := make([]byte, 4096)
			for {
				if err := q.Submit(Request{Op: OpRead, Buf: buf, Done: done}); err != nil {
					assert.ErrorIs(t, err, want)
					return
				}
				if c := q.Await(done); c.Err != nil {
					assert.ErrorIs(t, c.Err, want)
					return
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	return finished
}

// TestURingOwnerBroken: the ring breaking under the owner (its wait
// fails beyond retry) completes every request with the ring's error;
// Awaits and Close return.
func TestURingOwnerBroken(t *testing.T) {
	u := ownerRing(t)
	q, _ := ownerFile(t, u, 'a', 64)
	var calls atomic.Int32
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		// Only waits that submit nothing: a failed enter that carried
		// SQEs is a refusal (see TestURingOwnerRefused), not a break.
		if flags&ioringEnterGetEvents != 0 && toSubmit == 0 && calls.Add(1) > 50 {
			return 0, syscall.EFAULT
		}
		return u.r.enterKernel(toSubmit, minComplete, flags)
	}
	finished := readUntilFails(t, q, 8, syscall.EFAULT)
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("readers still running after the ring broke")
	}
	require.NoError(t, q.Close())
	u.mu.Lock()
	defer u.mu.Unlock()
	assert.Error(t, u.err)
	assert.Zero(t, q.pending)
}

// TestURingOwnerWanted: an owner takes the seat only while more
// goroutines wait than Ps run, and never with one P (it would keep the
// only P while it waits in the kernel).
func TestURingOwnerWanted(t *testing.T) {
	u := ownerRing(t)
	u.testOwner = false
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	u.mu.Lock()
	defer u.mu.Unlock()
	u.waiters.Store(2)
	assert.False(t, u.ownerWanted(), "2 waiters, 2 Ps")
	u.waiters.Store(3)
	assert.True(t, u.ownerWanted(), "3 waiters, 2 Ps")
	runtime.GOMAXPROCS(1)
	u.waiters.Store(16)
	assert.False(t, u.ownerWanted(), "one P")
}

// TestURingOwnerChurn: with the owner on, short transfers and EAGAIN are
// resubmitted (by the owner, from its reaping) and late completions post
// wake-up NOPs beside the handed-off SQEs: every read still completes
// whole with its file's bytes, and the owner leaves when the readers stop.
func TestURingOwnerChurn(t *testing.T) {
	u := ownerRing(t)
	q, _ := ownerFile(t, u, 'c', 32)
	q.x.faults = &churn{}
	var reads atomic.Int64
	hammer(time.Second, 12, func(_ int, stop *atomic.Bool) {
		reads.Add(int64(readLoop(t, q, 'c', true, stop)))
	})
	require.NoError(t, q.Close())
	t.Logf("%d reads", reads.Load())
	assert.Positive(t, reads.Load())
	u.mu.Lock()
	defer u.mu.Unlock()
	assert.Equal(t, len(u.ops), len(u.free), "op slots left taken")
}

// TestURingOwnerRefusalsBeside: goroutines whose own enters the kernel
// sometimes refuses (batches, which submit themselves) run beside
// goroutines that hand their Submits to the owner: a Submit that fails
// has no Completion, one that succeeds has exactly one, and nothing is
// left counted. (A handed-off push that kicked the owner once read the
// result another's push had left while it released the ring's mutex.)
func TestURingOwnerRefusalsBeside(t *testing.T) {
	u := ownerRing(t)
	q, _ := ownerFile(t, u, 'r', 64)
	var n atomic.Uint32
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		if toSubmit > 0 && flags&ioringEnterGetEvents == 0 && n.Add(1)%7 == 0 {
			return 0, syscall.ENOMEM
		}
		return u.r.enterKernel(toSubmit, minComplete, flags)
	}
	hammer(time.Second, 12, func(g int, stop *atomic.Bool) {
		done := make(chan Completion, 4)
		bufs := make([][]byte, 4)
		for k := range bufs {
			bufs[k] = make([]byte, 4096)
		}
		for !stop.Load() {
			m := 1
			if g%3 == 0 {
				m = 4 // a batch: its own enter
			}
			rs := make([]Request, m)
			for k := range rs {
				rs[k] = Request{Op: OpRead, Buf: bufs[k], Off: int64(k) * 4096, Token: uint64(k), Done: done}
			}
			var got int
			var err error
			if m == 1 {
				if err = q.Submit(rs[0]); err == nil {
					got = 1
				}
			} else {
				got, err = q.SubmitBatch(rs)
			}
			if err != nil && !errors.Is(err, syscall.ENOMEM) {
				t.Errorf("Submit: %v", err)
				return
			}
			for range got {
				c := q.Await(done)
				if c.Err != nil && !errors.Is(c.Err, syscall.ENOMEM) {
					t.Errorf("Completion: %v", c.Err)
					return
				}
			}
			select {
			case c := <-done:
				t.Errorf("a Completion nobody was owed: %+v (Submit said %v)", c, err)
				return
			default:
			}
		}
	})
	require.NoError(t, q.Close())
	u.mu.Lock()
	defer u.mu.Unlock()
	assert.Zero(t, q.pending)
	assert.Equal(t, len(u.ops), len(u.free), "op slots left taken")
}

// TestURingOwnerEnterGone: an owner whose io_uring_enter carrying SQEs
// fails with an error that says the ring is unusable (EBADF) breaks and
// drains the ring, rather than withdrawing the SQEs as a refusal and
// going on with a ring that fails everything: every request completes
// with the ring's error, Awaits and Close return, the owner leaves.
func TestURingOwnerEnterGone(t *testing.T) {
	u := ownerRing(t)
	q, _ := ownerFile(t, u, 'a', 64)
	var gone atomic.Bool
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		if gone.Load() {
			return 0, syscall.EBADF
		}
		return u.r.enterKernel(toSubmit, minComplete, flags)
	}
	finished := readUntilFails(t, q, 8, syscall.EBADF)
	time.Sleep(20 * time.Millisecond)
	gone.Store(true)
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("readers still running after every enter failed")
	}
	require.NoError(t, q.Close())
	u.mu.Lock()
	defer u.mu.Unlock()
	assert.Error(t, u.err, "the ring still in service")
	assert.Zero(t, q.pending)
}

// TestOwnerYielder checks the owner's yield back-off: every turn yields
// while yields are quick; a slow one stops yielding for yieldBackoff
// turns, twice as many after each slow one up to yieldBackoffMax; a
// quick one ends the back-off.
func TestOwnerYielder(t *testing.T) {
	var y yielder
	quick, slow := int64(yieldSlow)/10, int64(yieldSlow)*10
	// gap runs turns until one yields, reporting how many did not.
	gap := func() int {
		n := 0
		for !y.due() {
			n++
			if n > 10*yieldBackoffMax {
				t.Fatal("the owner never yields again")
			}
		}
		return n
	}
	for range 5 {
		if g := gap(); g != 0 {
			t.Fatalf("skipped %d turns while yields are quick", g)
		}
		y.took(quick)
	}
	want := yieldBackoff
	for range 10 {
		y.took(slow)
		if g := gap(); g != want {
			t.Fatalf("skipped %d turns after a slow yield, want %d", g, want)
		}
		want = min(2*want, yieldBackoffMax)
	}
	y.took(quick)
	if g := gap(); g != 0 {
		t.Fatalf("skipped %d turns after a quick yield", g)
	}
}
