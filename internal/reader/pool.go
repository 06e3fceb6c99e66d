package reader

import (
	"sync"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// A Buf is one read's aligned buffer and the channel its queued
// completion comes back on.
type Buf struct {
	Buf  *aligned.Buffer
	Done chan direct.Completion
	temp bool // made for one read beyond the pool's buffers: freed by Put
}

// A Pool hands out at most n Bufs of one size, allocated on first demand
// and kept for reuse until Close: a Reader's read memory is at most that
// many buffers, however many goroutines read. It is safe for concurrent
// use, so that Readers of files with one alignment may share one
// (Options.Small, Options.Large): the seam a memory budget shared by
// many Readers plugs into.
type Pool struct {
	size, align int
	tokens      chan struct{} // one per buffer that exists
	idle        chan *Buf

	shared *aligned.Pool // NewShared's budget; tokens and idle are then unused
}

// NewShared returns a Pool whose buffers come from p, one budget that
// many Readers share: it keeps no buffer of its own between reads, so a
// Reader holds read memory only while a read is in progress, however
// many Readers are open (Pebble keeps hundreds of sstables open). When
// p's budget is spent a read gets a buffer made for it alone, freed when
// it returns, rather than wait: memory beyond the budget is then bounded
// by the reads in progress, not by the files open.
func NewShared(p *aligned.Pool) *Pool {
	return &Pool{size: p.BufferSize(), align: p.Align(), shared: p}
}

// shells recycles the Bufs (and their channels) that carry a shared
// Pool's buffers, so that a read through one allocates nothing.
var shells = sync.Pool{New: func() any { return &Buf{Done: make(chan direct.Completion, 1)} }}

// NewPool returns a Pool of at most n buffers of size bytes, aligned to
// align.
func NewPool(n, size, align int) *Pool {
	return &Pool{size: size, align: align, tokens: make(chan struct{}, n), idle: make(chan *Buf, n)}
}

// Size returns the size of the Pool's buffers.
func (p *Pool) Size() int { return p.size }

// Align returns the memory alignment of the Pool's buffers.
func (p *Pool) Align() int { return p.align }

// Made returns how many of the Pool's buffers exist.
func (p *Pool) Made() int { return len(p.tokens) }

// Idle returns how many of the Pool's buffers exist and are not in use.
func (p *Pool) Idle() int { return len(p.idle) }

// Get returns a buffer, waiting while every one is in use (a shared
// Pool never waits: Get is GetAny).
func (p *Pool) Get() (*Buf, error) {
	if p.shared != nil {
		return p.GetAny()
	}
	select {
	case b := <-p.idle:
		return b, nil
	default:
	}
	select {
	case b := <-p.idle:
		return b, nil
	case p.tokens <- struct{}{}:
		return p.alloc()
	}
}

// TryGet returns a buffer if one is free or may still be made, else nil.
func (p *Pool) TryGet() (*Buf, error) {
	if p.shared != nil {
		b, ok, err := p.shared.TryGet()
		if !ok {
			return nil, err
		}
		sh := shells.Get().(*Buf)
		sh.Buf = b
		return sh, nil
	}
	select {
	case b := <-p.idle: // an idle buffer first: a select would pick at random
		return b, nil
	default:
	}
	select {
	case p.tokens <- struct{}{}:
		return p.alloc()
	default:
		return nil, nil
	}
}

// GetAny returns a pooled buffer if one is free or may still be made, else
// one made for this read alone, which Put frees: a read never waits for
// another's buffer. ReadAt and blobio's ReadBlob take theirs this way, so that they never wait for a buffer a ReadBlobs caller
// holds while its fn runs: two ReadBlobs whose fns read again would
// otherwise wait for each other for ever. A pooled buffer costs no
// allocation once made.
func (p *Pool) GetAny() (*Buf, error) {
	if b, err := p.TryGet(); b != nil || err != nil {
		return b, err
	}
	buf, err := aligned.New(p.size, p.align)
	if err != nil {
		return nil, err
	}
	return &Buf{Buf: buf, Done: make(chan direct.Completion, 1), temp: true}, nil
}

func (p *Pool) alloc() (*Buf, error) {
	b, err := aligned.New(p.size, p.align)
	if err != nil {
		<-p.tokens
		return nil, err
	}
	return &Buf{Buf: b, Done: make(chan direct.Completion, 1)}, nil
}

// Put returns b. It never blocks: idle has room for every buffer.
func (p *Pool) Put(b *Buf) {
	if b.temp {
		b.Buf.Free()
		return
	}
	if p.shared != nil {
		p.shared.Put(b.Buf)
		b.Buf = nil
		shells.Put(b)
		return
	}
	p.idle <- b
}

// Close frees the idle buffers. The caller makes sure none is in use. A
// shared Pool has none: its buffers are back in the shared budget.
func (p *Pool) Close() {
	if p.shared != nil {
		return
	}
	for {
		select {
		case b := <-p.idle:
			b.Buf.Free()
			<-p.tokens
		default:
			return
		}
	}
}
