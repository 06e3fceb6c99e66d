package aligned

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrPoolClosed is returned by Get on a closed Pool.
var ErrPoolClosed = errors.New("aligned: pool closed")

// A Pool hands out Buffers of one size under a byte budget, so that any
// number of writers sharing it can never hold more than the budget. Buffers
// are allocated on first demand and kept for reuse. A Pool is safe for
// concurrent use.
type Pool struct {
	size, align int
	slots       chan struct{} // one token per buffer the budget allows

	mu        sync.Mutex
	idle      []*Buffer
	inUse     int
	highWater int
	allocated int
	closed    bool
}

// PoolStats is a snapshot of a Pool's accounting.
type PoolStats struct {
	BufferSize int // bytes per buffer
	Capacity   int // buffers the budget allows
	InUse      int // buffers handed out and not yet returned
	HighWater  int // the most buffers ever in use at once
	Allocated  int // buffers currently backed by memory (in use or idle)
}

// NewPool returns a Pool of bufSize-byte buffers aligned to align, holding at
// most budget bytes. The budget must cover at least one buffer.
func NewPool(bufSize, align, budget int) (*Pool, error) {
	if err := check(bufSize, align); err != nil {
		return nil, err
	}
	n := budget / bufSize
	if n < 1 {
		return nil, fmt.Errorf("aligned: budget %d bytes is smaller than one %d-byte buffer", budget, bufSize)
	}
	return &Pool{size: bufSize, align: align, slots: make(chan struct{}, n)}, nil
}

// Get returns a buffer, waiting while the budget is spent. It returns the
// context's error if ctx ends first, and ErrPoolClosed once the Pool is
// closed. The buffer's contents are unspecified.
func (p *Pool) Get(ctx context.Context) (*Buffer, error) {
	select {
	case p.slots <- struct{}{}:
	default:
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("aligned: waiting for a %d-byte buffer: %w", p.size, context.Cause(ctx))
		}
	}
	b, err := p.take()
	if err != nil {
		<-p.slots
		return nil, err
	}
	return b, nil
}

// TryGet returns a buffer if the budget allows one now, and false otherwise.
// Its error, with false, is ErrPoolClosed or the allocation's.
func (p *Pool) TryGet() (*Buffer, bool, error) {
	select {
	case p.slots <- struct{}{}:
	default:
		return nil, false, nil
	}
	b, err := p.take()
	if err != nil {
		<-p.slots
		return nil, false, err
	}
	return b, true, nil
}

// take pops an idle buffer or allocates one; the caller holds a slot.
func (p *Pool) take() (*Buffer, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	var b *Buffer
	if n := len(p.idle); n > 0 {
		b = p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
	}
	if b == nil {
		p.allocated++ // counted before the allocation so Close sees it
	}
	p.inUse++
	if b != nil {
		p.highWater = max(p.highWater, p.inUse)
		p.mu.Unlock()
		b.idle = false
		return b, nil
	}
	p.mu.Unlock()
	b, err := New(p.size, p.align)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.allocated--
		p.inUse--
		return nil, err
	}
	// Counted once the buffer is held: a Get that failed to allocate
	// never had one in use.
	p.highWater = max(p.highWater, p.inUse)
	b.pool = p
	return b, nil
}

// Put returns b to the pool. Put(nil) does nothing. Returning a buffer that
// did not come from p, or returning it twice, panics: either would break
// the budget.
func (p *Pool) Put(b *Buffer) {
	if b == nil {
		return
	}
	if b.pool != p {
		panic("aligned: Put of a buffer that did not come from this pool")
	}
	p.mu.Lock()
	if b.idle {
		p.mu.Unlock()
		panic("aligned: buffer returned to its pool twice")
	}
	p.inUse--
	b.idle = true
	if p.closed {
		p.allocated--
		b.free()
	} else {
		p.idle = append(p.idle, b)
	}
	p.mu.Unlock()
	<-p.slots
}

// Stats returns a snapshot of the pool's accounting.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{
		BufferSize: p.size,
		Capacity:   cap(p.slots),
		InUse:      p.inUse,
		HighWater:  p.highWater,
		Allocated:  p.allocated,
	}
}

// BufferSize returns the size of the pool's buffers.
func (p *Pool) BufferSize() int { return p.size }

// Align returns the alignment of the pool's buffers.
func (p *Pool) Align() int { return p.align }

// Close frees the idle buffers and makes later Gets fail with ErrPoolClosed.
// Buffers still in use are freed as they are Put back.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, b := range p.idle {
		b.free()
	}
	p.allocated -= len(p.idle)
	p.idle = nil
}
