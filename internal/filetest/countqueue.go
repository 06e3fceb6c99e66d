package filetest

import (
	"errors"
	"sync"

	"github.com/dio-storage/dio/direct"
)

// ErrRefused is the error a CountQueue refuses a batch's tail with.
var ErrRefused = errors.New("batch refused")

// CountQueue wraps a queue as a direct.Batcher, for tests of how a caller
// hands its requests over: it counts the requests that go in one at a
// time and records the length of every batch, and after Refuse(n) it
// accepts only the first n requests of a batch and refuses the rest with
// ErrRefused. It is safe for concurrent use.
type CountQueue struct {
	direct.Queue
	mu      sync.Mutex
	submits int
	batches []int
	refuse  int
}

// NewCountQueue wraps q, accepting every request.
func NewCountQueue(q direct.Queue) *CountQueue {
	return &CountQueue{Queue: q, refuse: -1}
}

// Refuse makes every later batch refused after its first n requests;
// n < 0 accepts every request again.
func (q *CountQueue) Refuse(n int) {
	q.mu.Lock()
	q.refuse = n
	q.mu.Unlock()
}

// Counts returns how many requests went in one at a time and the length
// of every batch since the last call, and forgets them.
func (q *CountQueue) Counts() (submits int, batches []int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	submits, batches = q.submits, q.batches
	q.submits, q.batches = 0, nil
	return submits, batches
}

func (q *CountQueue) Submit(r direct.Request) error {
	q.mu.Lock()
	q.submits++
	q.mu.Unlock()
	return q.Queue.Submit(r)
}

func (q *CountQueue) SubmitBatch(rs []direct.Request) (int, error) {
	q.mu.Lock()
	q.batches = append(q.batches, len(rs))
	refuse := q.refuse
	q.mu.Unlock()
	if refuse < 0 || refuse >= len(rs) {
		return direct.SubmitBatch(q.Queue, rs)
	}
	n, err := direct.SubmitBatch(q.Queue, rs[:refuse])
	if err == nil {
		err = ErrRefused
	}
	return n, err
}
