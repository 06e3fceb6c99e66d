// Command uringowner is a measured prototype, not part of dio: the design
// docs/engine.md proposes as the io_uring engine's next step. One owner
// goroutine per ring, locked to its thread, makes every io_uring_enter
// (the ring set up with IORING_SETUP_SINGLE_ISSUER|DEFER_TASKRUN, so a
// read's completion runs as task work only when the owner waits, never on
// a sleeping Go thread); N goroutines push their SQEs under a mutex and
// wait on their own channel; an owner asleep in the kernel is woken by an
// eventfd that a read in its own ring watches. It reads 4 KiB at random
// offsets of a 256 MiB file with O_DIRECT for -d and prints the tag,
// reads/s and CPU µs per read (the whole process's rusage), the format
// of scripts/_cpuio, so the two run side by side:
//
//	go build -o /tmp/owner ./scripts/_uringowner
//	/tmp/owner -f FILE -n 16 [-defer=false] [-tag T]
//
// It has none of what the engine must keep (Close, broken rings, faults,
// short transfers, descriptor lifetimes); it measures what the hand-off
// costs and saves.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

type sqe struct {
	opcode, flags uint8
	ioprio        uint16
	fd            int32
	off, addr     uint64
	len, opFlags  uint32
	userData      uint64
	bufIndex      uint16
	personality   uint16
	spliceFdIn    int32
	addr3, pad    uint64
}
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sq                                                                     [10]uint32
	cq                                                                     [10]uint32
}

type ring struct {
	fd                     int
	sqHead, sqTail, cqHead *uint32
	cqTail                 *uint32
	sqMask, cqMask         uint32
	sqArray                []uint32
	sqes                   []sqe
	cqes                   []cqe
	local                  uint32
}

func newRing(n uint32, flags uint32) *ring {
	var p params
	p.flags = flags
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(n), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		panic(e)
	}
	r := &ring{fd: int(fd)}
	sqSize := int(p.sq[6] + p.sqEntries*4)
	cqSize := int(p.cq[5] + p.cqEntries*16)
	m, err := unix.Mmap(r.fd, 0, max(sqSize, cqSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		panic(err)
	}
	sm, err := unix.Mmap(r.fd, 0x10000000, int(p.sqEntries)*64, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		panic(err)
	}
	u32 := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&m[off])) }
	r.sqHead, r.sqTail, r.sqMask = u32(p.sq[0]), u32(p.sq[1]), *u32(p.sq[2])
	r.sqArray = unsafe.Slice(u32(p.sq[6]), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&sm[0])), p.sqEntries)
	r.cqHead, r.cqTail, r.cqMask = u32(p.cq[0]), u32(p.cq[1]), *u32(p.cq[2])
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&m[p.cq[5]])), p.cqEntries)
	return r
}

func (r *ring) push(s *sqe) {
	i := r.local & r.sqMask
	r.sqes[i] = *s
	r.sqArray[i] = i
	r.local++
	atomic.StoreUint32(r.sqTail, r.local)
}

type comp struct{ res int32 }

type engine struct {
	r        *ring
	mu       sync.Mutex
	cond     sync.Cond
	pushed   uint32 // SQEs pushed (== r.local)
	inflight int
	sleeping bool
	kicked   bool
	idle     bool
	efd      int
	evbuf    [8]byte
	waiters  []chan comp
	free     []uint32
	yield    bool // Gosched after delivering: measured worse, see docs/engine.md
}

const evData = 1 << 62

func newEngine(flags uint32, yield bool) *engine {
	e := &engine{yield: yield}
	e.cond.L = &e.mu
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		panic(err)
	}
	e.efd = efd
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		e.r = newRing(256, flags)
		e.armEvent()
		close(ready)
		e.owner()
	}()
	<-ready
	e.waiters = make([]chan comp, 255)
	for i := range e.waiters {
		e.free = append(e.free, uint32(i))
	}
	return e
}

func (e *engine) armEvent() {
	e.r.push(&sqe{opcode: 22, fd: int32(e.efd), addr: uint64(uintptr(unsafe.Pointer(&e.evbuf[0]))), len: 8, off: ^uint64(0), userData: evData})
	e.inflight++
}

// read submits a read and returns its channel.
func (e *engine) read(fd int, buf []byte, off int64, ch chan comp) {
	e.mu.Lock()
	for len(e.free) == 0 {
		e.cond.Wait()
	}
	i := e.free[len(e.free)-1]
	e.free = e.free[:len(e.free)-1]
	e.waiters[i] = ch
	e.r.push(&sqe{opcode: 22, fd: int32(fd), addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), len: uint32(len(buf)), off: uint64(off), userData: uint64(i)})
	e.inflight++
	kick := false
	if e.idle {
		e.idle = false
		e.cond.Broadcast()
	} else if e.sleeping && !e.kicked {
		e.kicked = true
		kick = true
	}
	e.mu.Unlock()
	if kick {
		var one = [8]byte{1}
		unix.Write(e.efd, one[:])
	}
}

func (e *engine) owner() {
	runtime.LockOSThread()
	var submitted uint32
	for {
		e.mu.Lock()
		n := e.r.local - submitted
		for n == 0 && e.inflight == 1 { // only the event read
			e.idle = true
			e.cond.Wait()
			n = e.r.local - submitted
		}
		e.idle = false
		e.sleeping = true
		e.mu.Unlock()
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(e.r.fd), uintptr(n), 1, 1, 0, 0)
		if errno != 0 && errno != unix.EINTR && errno != unix.EAGAIN && errno != unix.EBUSY {
			panic(errno)
		}
		submitted = atomic.LoadUint32(e.r.sqHead)
		e.mu.Lock()
		e.sleeping = false
		e.mu.Unlock()
		head := atomic.LoadUint32(e.r.cqHead)
		tail := atomic.LoadUint32(e.r.cqTail)
		var rearm bool
		k := 0
		for h := head; h != tail; h++ {
			c := e.r.cqes[h&e.r.cqMask]
			if c.userData == evData {
				rearm = true
				continue
			}
			ch := e.waiters[c.userData]
			e.waiters[c.userData] = nil
			ch <- comp{c.res}
			k++
		}
		atomic.StoreUint32(e.r.cqHead, tail)
		e.mu.Lock()
		e.inflight -= int(tail - head)
		for h := head; h != tail; h++ {
			if ud := e.r.cqes[h&e.r.cqMask].userData; ud != evData {
				e.free = append(e.free, uint32(ud))
			}
		}
		if rearm {
			e.kicked = false
			e.armEvent()
		}
		if k > 0 {
			e.cond.Broadcast()
		}
		e.mu.Unlock()
		if e.yield && k > 0 {
			runtime.Gosched()
		}
	}
}

func self() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	path := flag.String("f", "", "file")
	d := flag.Duration("d", 2*time.Second, "")
	n := flag.Int("n", 16, "")
	defer_ := flag.Bool("defer", true, "SINGLE_ISSUER|DEFER_TASKRUN")
	yield := flag.Bool("yield", false, "")
	tag := flag.String("tag", "owner", "")
	flag.Parse()
	var flags uint32
	if *defer_ {
		flags = 1<<12 | 1<<13
	}
	e := newEngine(flags, *yield)
	fd, err := unix.Open(*path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		panic(err)
	}
	nblocks := int64(256 << 20 / 4096)
	var ops atomic.Int64
	t0, c0 := time.Now(), self()
	var wg sync.WaitGroup
	for g := 0; g < *n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, _ := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
			ch := make(chan comp, 1)
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for time.Since(t0) < *d {
				for k := 0; k < 64; k++ {
					e.read(fd, m, r.Int64N(nblocks)*4096, ch)
					c := <-ch
					if c.res != 4096 {
						fmt.Println("res", c.res)
						os.Exit(1)
					}
					ops.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	el, used := time.Since(t0), self()-c0
	fmt.Printf("%s\t%d\t%.2f\n", *tag, int(float64(ops.Load())/el.Seconds()), float64(used.Microseconds())/float64(ops.Load()))
}
