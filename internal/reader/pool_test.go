package reader

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPool: at most n buffers exist; TryGet says so instead of waiting.
func TestPool(t *testing.T) {
	p := NewPool(2, 4096, 4096)
	a, err := p.Get()
	require.NoError(t, err)
	b, err := p.TryGet()
	require.NoError(t, err)
	require.NotNil(t, b)
	c, err := p.TryGet()
	require.NoError(t, err)
	assert.Nil(t, c, "a third buffer past the bound")
	p.Put(a)
	c, err = p.Get()
	require.NoError(t, err)
	assert.Same(t, a, c, "a buffer put back is reused")
	p.Put(b)
	p.Put(c)
	p.Close()
	assert.Empty(t, p.tokens, "close freed every buffer")
}
