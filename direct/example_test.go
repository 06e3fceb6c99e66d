package direct_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// openDirect opens name with O_DIRECT, or through the page cache where the
// filesystem refuses it (ramfs; package fallback makes that choice for a
// service).
func openDirect(name string) (*direct.File, error) {
	f, err := direct.Open(name, os.O_RDWR|os.O_CREATE, 0o644)
	if !errors.Is(err, direct.ErrNotSupported) {
		return f, err
	}
	o, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return direct.Buffered(o), nil
}

func Example() {
	dir, err := os.MkdirTemp("", "direct-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	f, err := openDirect(filepath.Join(dir, "data"))
	if err != nil {
		panic(err)
	}
	defer f.Close()

	// A direct write covers whole blocks from memory aligned for the
	// device: an aligned.Buffer of 4 KiB (a whole number of blocks on any
	// device up to 4 KiB sectors, and on any larger one a block), its tail
	// zeroed.
	a := f.Alignment()
	buf, err := aligned.New(aligned.Up(direct.DefaultAlignment, a.Block()), a.Memory)
	if err != nil {
		panic(err)
	}
	defer buf.Free()
	n := copy(buf.Bytes(), "hello, disk")
	aligned.PadZero(buf.Bytes(), n, a.Offset)
	if _, err := f.WriteAt(buf.Bytes(), 0); err != nil {
		panic(err)
	}

	// An unaligned length is refused before it reaches the kernel.
	_, err = f.WriteAt(buf.Bytes()[:n], 0)
	fmt.Println("unaligned refused:", errors.Is(err, direct.ErrUnaligned) || a.Offset == 1)

	clear(buf.Bytes())
	if _, err := f.ReadAt(buf.Bytes(), 0); err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", buf.Bytes()[:n])
	// Output:
	// unaligned refused: true
	// hello, disk
}

func ExampleQueue() {
	dir, err := os.MkdirTemp("", "direct-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	f, err := openDirect(filepath.Join(dir, "data"))
	if err != nil {
		panic(err)
	}
	defer f.Close()
	q, err := f.NewQueue(nil) // io_uring where the kernel offers it, else pwrite workers
	if err != nil {
		panic(err)
	}
	defer q.Close()

	a := f.Alignment()
	block := aligned.Up(direct.DefaultAlignment, a.Block()) // as in Example
	const blocks = 4
	buf, err := aligned.New(blocks*block, a.Memory)
	if err != nil {
		panic(err)
	}
	defer buf.Free()

	// Write four blocks at once, each with its own token; every Request
	// gets exactly one Completion on Done, which must have room for them.
	done := make(chan direct.Completion, blocks)
	for i := range blocks {
		b := buf.Bytes()[i*block : (i+1)*block]
		copy(b, fmt.Sprintf("block %d", i))
		err := q.Submit(direct.Request{Op: direct.OpWrite, Buf: b, Off: int64(i * block), Token: uint64(i), Done: done})
		if err != nil {
			panic(err)
		}
	}
	var written int
	for range blocks {
		c := q.Await(done) // completions come in any order
		if c.Err != nil {
			panic(c.Err)
		}
		written += c.N
	}
	fmt.Println("all written:", written == len(buf.Bytes()))

	// A sync, then a read of the third block.
	if err := q.Submit(direct.Request{Op: direct.OpSync, Done: done}); err != nil {
		panic(err)
	}
	if c := q.Await(done); c.Err != nil {
		panic(c.Err)
	}
	clear(buf.Bytes())
	b := buf.Bytes()[:block]
	if err := q.Submit(direct.Request{Op: direct.OpRead, Buf: b, Off: int64(2 * block), Done: done}); err != nil {
		panic(err)
	}
	c := q.Await(done)
	fmt.Printf("%v %s\n", c.Err, b[:len("block 2")])
	// Output:
	// all written: true
	// <nil> block 2
}

func ExampleSubmitBatch() {
	dir, err := os.MkdirTemp("", "direct-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	f, err := openDirect(filepath.Join(dir, "data"))
	if err != nil {
		panic(err)
	}
	defer f.Close()
	q, err := f.NewQueue(&direct.QueueOptions{Depth: 8})
	if err != nil {
		panic(err)
	}
	defer q.Close()

	block := aligned.Up(direct.DefaultAlignment, f.Alignment().Block())
	const blocks = 8
	buf, err := aligned.New(blocks*block, f.Alignment().Memory)
	if err != nil {
		panic(err)
	}
	defer buf.Free()

	// Eight writes, into the kernel together: one io_uring_enter on the
	// io_uring engine, where eight Submits would make eight.
	done := make(chan direct.Completion, blocks)
	rs := make([]direct.Request, blocks)
	for i := range rs {
		b := buf.Bytes()[i*block : (i+1)*block]
		copy(b, fmt.Sprintf("block %d", i))
		rs[i] = direct.Request{Op: direct.OpWrite, Buf: b, Off: int64(i * block), Token: uint64(i), Done: done}
	}
	n, err := direct.SubmitBatch(q, rs)
	if err != nil {
		// rs[:n] were accepted and complete below; rs[n:] were not.
		fmt.Println("stopped at", n, err)
	}
	written := 0
	for range n {
		if c := q.Await(done); c.Err == nil {
			written++
		}
	}
	fmt.Println("written:", written)
	// Output:
	// written: 8
}
