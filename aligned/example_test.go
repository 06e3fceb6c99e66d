package aligned_test

import (
	"context"
	"fmt"

	"github.com/dio-storage/dio/aligned"
)

func ExamplePool() {
	// Two 64 KiB buffers at most, aligned for any device up to 4 KiB sectors.
	pool, err := aligned.NewPool(aligned.DefaultBufferSize, 4096, 2*aligned.DefaultBufferSize)
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	buf, err := pool.Get(context.Background())
	if err != nil {
		panic(err)
	}
	n := copy(buf.Bytes(), "hello")
	n = aligned.PadZero(buf.Bytes(), n, 4096) // a direct write must cover whole blocks
	fmt.Println(n, aligned.IsSliceAligned(buf.Bytes(), 4096))
	pool.Put(buf)
	fmt.Println(pool.Stats().InUse, pool.Stats().HighWater)
	// Output:
	// 4096 true
	// 0 1
}
