package faults_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
)

// A Plan handed to blobio.Options.Faults makes the writer's second write
// (counting from 0, After: 1) fail with EIO, as a failing disk would. The
// error reaches the caller at the Sync or Close that waits for the write,
// matches syscall.EIO, and leaves the file cut back to what was synced.
func Example() {
	dir, err := os.MkdirTemp("", "faults-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "layer")

	plan := faults.NewPlan(faults.Fail(direct.OpWrite, 1, syscall.EIO))
	w, err := blobio.Create(path, &blobio.Options{Faults: plan})
	if err != nil {
		panic(err)
	}
	if _, err := w.WriteBlob([]byte("first")); err != nil {
		panic(err)
	}
	fmt.Println("first sync:", w.Sync()) // the first write

	if _, err := w.WriteBlob([]byte("second")); err != nil {
		panic(err)
	}
	err = w.Sync() // the second write fails
	fmt.Println("second sync is EIO:", errors.Is(err, syscall.EIO))
	err = w.Close() // the writer keeps the error
	fmt.Println("close is EIO:", errors.Is(err, syscall.EIO))
	fmt.Println("injected:", plan.Injected()["EIO"] > 0)

	// What the first Sync made durable is intact.
	r, err := blobio.Open(path, nil)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	b, err := r.ReadBlob(0, nil)
	fmt.Printf("first blob: %s %v\n", b, err)
	// Output:
	// first sync: <nil>
	// second sync is EIO: true
	// close is EIO: true
	// injected: true
	// first blob: first <nil>
}

// The same Plan fails the second write of a direct.Queue: the Completion
// carries the error.
func Example_queue() {
	dir, err := os.MkdirTemp("", "faults-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "data"))
	if err != nil {
		panic(err)
	}
	defer f.Close()

	plan := faults.NewPlan(faults.Fail(direct.OpWrite, 1, syscall.EIO))
	q, err := direct.NewQueue(f, &direct.QueueOptions{Depth: 1, Faults: plan})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	done := make(chan direct.Completion, 1)
	for i := range 3 {
		err := q.Submit(direct.Request{Op: direct.OpWrite, Buf: []byte("data"), Off: int64(4 * i), Token: uint64(i), Done: done})
		if err != nil {
			panic(err)
		}
		c := q.Await(done)
		fmt.Println(c.Token, errors.Is(c.Err, syscall.EIO))
	}
	// Output:
	// 0 false
	// 1 true
	// 2 true
}
