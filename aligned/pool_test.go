package aligned

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPoolBudgetBlocksAndReuses(t *testing.T) {
	p, err := NewPool(4096, 4096, 2*4096+100)
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()

	a, err := p.Get(ctx)
	require.NoError(t, err)
	b, err := p.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, PoolStats{BufferSize: 4096, Capacity: 2, InUse: 2, HighWater: 2, Allocated: 2}, p.Stats())

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	c, err := p.Get(short)
	assert.Nil(t, c)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	_, ok, err := p.TryGet()
	require.NoError(t, err)
	assert.False(t, ok, "TryGet succeeded past the budget")

	got := make(chan *Buffer)
	go func() {
		b, err := p.Get(ctx)
		assert.NoError(t, err)
		got <- b
	}()
	select {
	case <-got:
		t.Fatal("Get returned while the budget was spent")
	case <-time.After(20 * time.Millisecond):
	}
	p.Put(a)
	c = <-got
	assert.Same(t, a, c, "a returned buffer is reused, not reallocated")
	p.Put(b)
	p.Put(c)
	st := p.Stats()
	assert.Equal(t, 0, st.InUse)
	assert.Equal(t, 2, st.HighWater)
	assert.Equal(t, 2, st.Allocated)
}

func TestPoolMisuse(t *testing.T) {
	_, err := NewPool(4096, 4096, 4095)
	assert.Error(t, err)
	_, err = NewPool(4000, 4096, 1<<20)
	assert.ErrorIs(t, err, ErrBadSize)

	p, err := NewPool(4096, 4096, 1<<20)
	require.NoError(t, err)
	b, err := p.Get(context.Background())
	require.NoError(t, err)
	p.Put(b)
	assert.PanicsWithValue(t, "aligned: buffer returned to its pool twice", func() { p.Put(b) })

	other, err := New(4096, 4096)
	require.NoError(t, err)
	defer other.Free()
	assert.PanicsWithValue(t, "aligned: Put of a buffer that did not come from this pool", func() { p.Put(other) })
	q, err := NewPool(4096, 4096, 1<<20)
	require.NoError(t, err)
	defer q.Close()
	fromQ, err := q.Get(context.Background())
	require.NoError(t, err)
	assert.Panics(t, func() { p.Put(fromQ) }, "a buffer of another pool of the same shape")
	q.Put(fromQ)
	assert.Zero(t, q.Stats().InUse)
	p.Put(nil)

	p.Close()
	_, err = p.Get(context.Background())
	assert.ErrorIs(t, err, ErrPoolClosed)
	assert.Equal(t, 0, p.Stats().Allocated)
}

func TestPoolCloseFreesBuffersReturnedLater(t *testing.T) {
	p, err := NewPool(4096, 4096, 1<<20)
	require.NoError(t, err)
	b, err := p.Get(context.Background())
	require.NoError(t, err)
	p.Close()
	assert.Equal(t, 1, p.Stats().Allocated)
	p.Put(b)
	assert.Equal(t, 0, p.Stats().Allocated)
	assert.Nil(t, b.Bytes(), "a buffer returned to a closed pool is freed")
}

func TestPoolConcurrentNeverExceedsBudget(t *testing.T) {
	const capacity = 4
	p, err := NewPool(4096, 512, capacity*4096)
	require.NoError(t, err)
	defer p.Close()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				b, err := p.Get(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				b.Bytes()[0] = byte(g + i)
				p.Put(b)
			}
		})
	}
	wg.Wait()
	st := p.Stats()
	assert.LessOrEqual(t, st.HighWater, capacity)
	assert.LessOrEqual(t, st.Allocated, capacity)
	assert.Equal(t, 0, st.InUse)
}

// TestPoolRefusesFree: Free on a pooled buffer panics and leaves it whole,
// so Put still returns it and the budget is back to full.
func TestPoolRefusesFree(t *testing.T) {
	p, err := NewPool(4096, 4096, 4096)
	require.NoError(t, err)
	defer p.Close()
	b, err := p.Get(context.Background())
	require.NoError(t, err)
	const want = "aligned: Free of a buffer that belongs to a Pool; return it with Put"
	assert.PanicsWithValue(t, want, b.Free)
	assert.Len(t, b.Bytes(), 4096, "a refused Free releases nothing")
	p.Put(b)
	assert.PanicsWithValue(t, want, b.Free, "an idle pooled buffer is not the caller's either")
	assert.Equal(t, PoolStats{BufferSize: 4096, Capacity: 1, InUse: 0, HighWater: 1, Allocated: 1}, p.Stats())

	again, ok, err := p.TryGet()
	require.NoError(t, err)
	require.True(t, ok, "the budget is whole again")
	assert.Same(t, b, again)
	again.Bytes()[4095] = 1 // its memory is still mapped
	p.Put(again)
}
