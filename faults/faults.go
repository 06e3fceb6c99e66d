// Package faults makes dio's I/O fail on purpose, for tests of dio and of
// programs built on it. A Plan is a direct.Injector, and the file carries
// it, as Pebble's errorfs wraps the filesystem: direct.File.WithFaults and
// fallback.WithFaults return a file whose reads, writes and fdatasyncs,
// through its methods and every queue made from it, meet the Plan before
// each system call, under the engine's own retries and resumption.
// blobio.Options.Faults and ephemeral.Options.Faults wrap the file they
// open; direct.QueueOptions.Faults sets one queue's. The engine then fails,
// shortens or delays the system calls the Plan's rules pick.
package faults

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/dio-storage/dio/direct"
)

// A Rule picks system calls and says what happens to them.
type Rule struct {
	Op    direct.Op // the operation it applies to; 0: any
	After int       // let this many matching calls through first
	Times int       // then apply to this many; 0: every one after
	Fault direct.Fault

	// Off and Len, when Len > 0, pick only the calls whose range meets
	// [Off, Off+Len): a bad sector fails every read that covers it.
	Off int64
	Len int64
}

// BadSectors makes every read that covers a byte of [off, off+n) fail
// with EIO, as a latent sector error does.
func BadSectors(off, n int64) Rule {
	return Rule{Op: direct.OpRead, Off: off, Len: n, Fault: direct.Fault{Err: syscall.EIO}}
}

// Shorthands for the common rules.

// Fail makes the n-th call of op (counting from 0) and every later one
// fail with errno.
func Fail(op direct.Op, n int, errno syscall.Errno) Rule {
	return Rule{Op: op, After: n, Fault: direct.Fault{Err: errno}}
}

// Transient makes the first times calls of op fail with errno, meant for
// EINTR or EAGAIN, and lets every later one through: an engine that retries
// as it should succeeds on call times+1. Calls an earlier rule of the Plan
// picks are not counted. times 0 fails every call, for good.
func Transient(op direct.Op, times int, errno syscall.Errno) Rule {
	return Rule{Op: op, Times: times, Fault: direct.Fault{Err: errno}}
}

// Short makes the first times calls of op transfer at most n bytes.
func Short(op direct.Op, times, n int) Rule {
	return Rule{Op: op, Times: times, Fault: direct.Fault{Short: n}}
}

// Late delays the first times calls of op by d.
func Late(op direct.Op, times int, d time.Duration) Rule {
	return Rule{Op: op, Times: times, Fault: direct.Fault{Delay: d}}
}

// A Plan applies rules in order: the first that picks a call decides it. It
// counts what it injected. A Plan is safe for concurrent use.
type Plan struct {
	mu       sync.Mutex
	rules    []Rule
	seen     []int // matching calls per rule
	injected map[string]int
}

// NewPlan returns a Plan of the rules.
func NewPlan(rules ...Rule) *Plan {
	return &Plan{rules: rules, seen: make([]int, len(rules)), injected: map[string]int{}}
}

// Inject implements direct.Injector.
func (p *Plan) Inject(op direct.Op, off int64, n int) (direct.Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, r := range p.rules {
		if r.Op != 0 && r.Op != op || r.Len > 0 && (off >= r.Off+r.Len || off+int64(n) <= r.Off) {
			continue
		}
		k := p.seen[i]
		p.seen[i]++
		if k < r.After || r.Times > 0 && k >= r.After+r.Times {
			continue
		}
		if r.Fault.Short > 0 && (op == direct.OpSync || n <= r.Fault.Short) {
			continue // nothing to shorten
		}
		p.injected[kind(r.Fault)]++
		return r.Fault, true
	}
	return direct.Fault{}, false
}

// Injected returns how many faults the plan injected, by kind: the errno's
// name ("EIO"), "short" or "late".
func (p *Plan) Injected() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.injected))
	for k, v := range p.injected {
		m[k] = v
	}
	return m
}

func kind(f direct.Fault) string {
	switch {
	case f.Err != 0:
		return errnoName(f.Err)
	case f.Short > 0:
		return "short"
	}
	return "late"
}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EIO:
		return "EIO"
	case syscall.ENOSPC:
		return "ENOSPC"
	case syscall.EINTR:
		return "EINTR"
	case syscall.EAGAIN:
		return "EAGAIN"
	}
	return fmt.Sprintf("errno %d", int(e))
}
