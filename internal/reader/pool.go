package reader

import (
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
}

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

// Get returns a buffer, waiting while every one is in use.
func (p *Pool) Get() (*Buf, error) {
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
	p.idle <- b
}

// Close frees the idle buffers. The caller makes sure none is in use.
func (p *Pool) Close() {
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
