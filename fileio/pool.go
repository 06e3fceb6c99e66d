package fileio

import (
	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// A readBuf is one read's aligned buffer and the channel its queued
// completion comes back on.
type readBuf struct {
	buf  *aligned.Buffer
	done chan direct.Completion
	temp bool // made for one read beyond the pool's buffers: freed by put
}

// A bufPool keeps at most cap(tokens) readBufs of one size, allocated on
// first demand and kept for reuse until the Reader closes: a Reader holds
// at most that many buffers between reads, however many goroutines read.
type bufPool struct {
	size, align int
	tokens      chan struct{} // one per buffer that exists
	idle        chan *readBuf
}

func newBufPool(n, size, align int) *bufPool {
	return &bufPool{size: size, align: align, tokens: make(chan struct{}, n), idle: make(chan *readBuf, n)}
}

// tryGet returns a buffer if one is free or may still be made, else nil.
func (p *bufPool) tryGet() (*readBuf, error) {
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

// getAny returns a pooled buffer if one is free or may still be made, else
// one made for this read alone: a read never waits for another's buffer.
func (p *bufPool) getAny() (*readBuf, error) {
	if b, err := p.tryGet(); b != nil || err != nil {
		return b, err
	}
	buf, err := aligned.New(p.size, p.align)
	if err != nil {
		return nil, err
	}
	return &readBuf{buf: buf, done: make(chan direct.Completion, 1), temp: true}, nil
}

func (p *bufPool) alloc() (*readBuf, error) {
	b, err := aligned.New(p.size, p.align)
	if err != nil {
		<-p.tokens
		return nil, err
	}
	return &readBuf{buf: b, done: make(chan direct.Completion, 1)}, nil
}

// put returns b. It never blocks: idle has room for every buffer.
func (p *bufPool) put(b *readBuf) {
	if b.temp {
		b.buf.Free()
		return
	}
	p.idle <- b
}

// close frees the idle buffers. The caller makes sure none is in use.
func (p *bufPool) close() {
	for {
		select {
		case b := <-p.idle:
			b.buf.Free()
			<-p.tokens
		default:
			return
		}
	}
}
