package direct_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/testenv"
)

// benchRegion is the preallocated span sequential writes cycle through, as
// fio's default --fallocate=native prepares its file: writes inside the
// file's size are not extending writes, which ext4 and xfs serialise.
const benchRegion = 256 << 20

// BenchmarkQueue writes sequentially through a queue with qd requests in
// flight. Compare with
//
//	fio --name=w --directory=$DIO_TEST_DIR --ioengine=io_uring --direct=1 \
//	    --rw=write --bs=64k --iodepth=4 --size=256M
func BenchmarkQueue(b *testing.B) {
	kinds := []direct.EngineKind{direct.EnginePwrite, direct.EngineURing}
	for _, kind := range kinds {
		for _, qd := range []int{1, 2, 4, 8} {
			for _, bs := range []int{8 << 10, 64 << 10, 256 << 10, 1 << 20} {
				name := fmt.Sprintf("engine=%v/qd=%d/bs=%s", kind, qd, sizeName(bs))
				b.Run(name, func(b *testing.B) { benchQueue(b, kind, qd, bs) })
			}
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

func benchQueue(b *testing.B, kind direct.EngineKind, qd, bs int) {
	if kind == direct.EngineURing {
		if err := direct.URingErrorAt(testenv.Dir(b)); err != nil {
			b.Skipf("io_uring unavailable: %v", err)
		}
	}
	f, err := direct.Open(filepath.Join(testenv.Dir(b), "bench"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if errors.Is(err, direct.ErrNotSupported) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	err = f.Allocate(0, benchRegion)
	if errors.Is(err, errors.ErrUnsupported) {
		err = f.Truncate(benchRegion)
	}
	if err != nil {
		b.Fatal(err)
	}
	q, err := f.NewQueue(&direct.QueueOptions{Depth: qd, Engine: kind})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()

	bufs := make([][]byte, qd)
	for i := range bufs {
		buf, err := aligned.New(bs, f.Alignment().Memory)
		if err != nil {
			b.Fatal(err)
		}
		defer buf.Free()
		for j := range buf.Bytes() {
			buf.Bytes()[j] = byte(j)
		}
		bufs[i] = buf.Bytes()
	}
	done := make(chan direct.Completion, qd)
	free := make([]uint64, 0, qd)
	for i := range qd {
		free = append(free, uint64(i))
	}
	b.SetBytes(int64(bs))
	b.ReportAllocs()
	b.ResetTimer()
	var off int64
	for range b.N {
		if len(free) == 0 {
			c := q.Await(done)
			if c.Err != nil {
				b.Fatal(c.Err)
			}
			free = append(free, c.Token)
		}
		tok := free[len(free)-1]
		free = free[:len(free)-1]
		if err := q.Submit(direct.Request{Op: direct.OpWrite, Buf: bufs[tok], Off: off, Token: tok, Done: done}); err != nil {
			b.Fatal(err)
		}
		if off += int64(bs); off+int64(bs) > benchRegion {
			off = 0
		}
	}
	for len(free) < qd {
		c := q.Await(done)
		if c.Err != nil {
			b.Fatal(c.Err)
		}
		free = append(free, c.Token)
	}
}
