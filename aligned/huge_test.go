//go:build unix

package aligned_test

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
)

// TestHugeSizes: a size no system maps (1 PiB, or the largest aligned int)
// fails at New with an error naming the size and matching ENOMEM, never a
// panic or a short buffer; a Pool of such buffers is made (it maps nothing
// up front) and its Get fails the same way, giving its budget back and
// leaving no buffer counted as ever in use.
func TestHugeSizes(t *testing.T) {
	const pib = 1 << 50
	for _, c := range []struct{ size, align int }{
		{pib, 4096},
		{int(^uint(0)>>1) &^ (1<<30 - 1), 1 << 30}, // the largest multiple of 1 GiB: its over-mapping must not wrap
	} {
		b, err := aligned.New(c.size, c.align)
		require.Error(t, err, "size %d", c.size)
		assert.Nil(t, b)
		assert.True(t, errors.Is(err, syscall.ENOMEM), "%v", err)
		assert.Contains(t, err.Error(), strconv.Itoa(c.size))
	}

	p, err := aligned.NewPool(pib, 4096, 2*pib)
	require.NoError(t, err)
	defer p.Close()
	for range 3 { // the budget is two: a failed Get must give its share back
		_, err := p.Get(context.Background())
		require.ErrorIs(t, err, syscall.ENOMEM)
	}
	st := p.Stats()
	assert.Equal(t, 0, st.InUse)
	assert.Equal(t, 0, st.Allocated)
	assert.Equal(t, 0, st.HighWater)
}
