// Command cpuio measures what an I/O costs: operations per second and CPU
// µs per operation, the whole process's rusage (user + system, every
// thread, io_uring's io-wq workers included), for one way of reading or
// writing a file through dio's public API, or for fio doing the same as
// our child (its rusage from wait4, since fio's own usr/sys figure leaves
// its workers out). One mode per run, one tab-separated line out:
// tag, mode, ops/s, CPU µs/op; scripts/cpu-per-io.sh interleaves modes and
// builds, and -summarize prints their medians.
//
// It lives in a directory the go tool's ./... patterns skip, so that the
// module's builds and tests never run it; build it with
// go build ./scripts/_cpuio.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fileio"
)

const blob = 4092

func cpu(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func self() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpu(&ru)
}

func main() {
	mode := flag.String("mode", "queue", "setup|queue|queuedepth|queuedepth1|readblob|readblob1|readat|readblobs|pread|pread1|fio|fio1|fiojobs|append|fioappend")
	summarize := flag.Bool("summarize", false, "read result lines on stdin and print the medians of each mode and tag")
	path := flag.String("f", "", "file")
	d := flag.Duration("d", 2*time.Second, "duration")
	n := flag.Int("n", 16, "goroutines / QD")
	tag := flag.String("tag", "", "label")
	flag.Parse()
	if *summarize {
		summary(os.Stdin, os.Stdout)
		return
	}
	size := int64(256 << 20)
	nblobs := size / 4096
	var ops atomic.Int64
	var t0 time.Time
	var c0 time.Duration
	start := func() { t0, c0 = time.Now(), self() }
	var elapsed, used time.Duration
	stop := func() { elapsed, used = time.Since(t0), self()-c0 }
	deadline := func() bool { return time.Since(t0) >= *d }
	must := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	switch *mode {
	case "setup":
		w, err := blobio.Create(*path, nil)
		must(err)
		p := make([]byte, blob)
		for i := int64(0); i < nblobs; i++ {
			p[0] = byte(i)
			_, err := w.WriteBlob(p)
			must(err)
		}
		must(w.Close())
		return
	case "queue":
		f, err := direct.Open(*path, os.O_RDONLY, 0)
		must(err)
		q, err := f.NewQueue(&direct.QueueOptions{Depth: *n})
		must(err)
		var wg sync.WaitGroup
		start()
		for g := 0; g < *n; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := alignedBuf(4096)
				done := make(chan direct.Completion, 1)
				r := rand.New(rand.NewPCG(uint64(g), 1))
				for !deadline() {
					for k := 0; k < 64; k++ {
						must(q.Submit(direct.Request{Op: direct.OpRead, Buf: buf, Off: r.Int64N(nblobs) * 4096, Done: done}))
						c := q.Await(done)
						must(c.Err)
						ops.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		stop()
		q.Close()
		f.Close()
	case "queuedepth", "queuedepth1":
		// fio's shape on a Queue: one goroutine keeps -n reads in
		// flight, resubmitting as they complete: queuedepth1 each
		// read as Await returns it, queuedepth (as fio does) every
		// completion already delivered together, in one SubmitBatch.
		f, err := direct.Open(*path, os.O_RDONLY, 0)
		must(err)
		q, err := f.NewQueue(&direct.QueueOptions{Depth: *n})
		must(err)
		done := make(chan direct.Completion, *n)
		bufs := make([][]byte, *n)
		r := rand.New(rand.NewPCG(9, 1))
		submit := func(k int) {
			must(q.Submit(direct.Request{Op: direct.OpRead, Buf: bufs[k], Off: r.Int64N(nblobs) * 4096, Token: uint64(k), Done: done}))
		}
		start()
		for k := range bufs {
			bufs[k] = alignedBuf(4096)
			submit(k)
		}
		batch := make([]direct.Request, 0, *n)
		for inflight := *n; inflight > 0; {
			c := q.Await(done)
			batch = batch[:0]
			for more := true; more; {
				must(c.Err)
				ops.Add(1)
				k := int(c.Token)
				batch = append(batch, direct.Request{Op: direct.OpRead, Buf: bufs[k], Off: r.Int64N(nblobs) * 4096, Token: uint64(k), Done: done})
				if more = *mode == "queuedepth"; more {
					select {
					case c = <-done:
					default:
						more = false
					}
				}
			}
			if deadline() {
				inflight -= len(batch)
				continue
			}
			_, err := direct.SubmitBatch(q, batch)
			must(err)
		}
		stop()
		q.Close()
		f.Close()
	case "readblob":
		rd, err := blobio.Open(*path, nil)
		must(err)
		var wg sync.WaitGroup
		start()
		for g := 0; g < *n; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var dst []byte
				r := rand.New(rand.NewPCG(uint64(g), 2))
				for !deadline() {
					for k := 0; k < 64; k++ {
						dst, err = rd.ReadBlob(r.Int64N(nblobs)*4096, dst)
						must(err)
						ops.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		stop()
		rd.Close()
	case "readat":
		// fileio's ReadAt from -n goroutines: 4 KiB at 4 KiB offsets,
		// the same spans as readblob's, without the blob format.
		rd, err := fileio.Open(*path, nil)
		must(err)
		var wg sync.WaitGroup
		start()
		for g := 0; g < *n; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := make([]byte, 4096)
				r := rand.New(rand.NewPCG(uint64(g), 5))
				for !deadline() {
					for k := 0; k < 64; k++ {
						_, err := rd.ReadAt(p, r.Int64N(nblobs)*4096)
						must(err)
						ops.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		stop()
		rd.Close()
	case "readblobs":
		rd, err := blobio.Open(*path, nil)
		must(err)
		r := rand.New(rand.NewPCG(7, 3))
		offs := make([]int64, 64)
		start()
		for !deadline() {
			for i := range offs {
				offs[i] = r.Int64N(nblobs) * 4096
			}
			must(rd.ReadBlobs(offs, func(int, []byte) error { return nil }))
			ops.Add(int64(len(offs)))
		}
		stop()
		rd.Close()
	case "pread", "pread1":
		if *mode == "pread1" {
			*n = 1
		}
		f, err := direct.Open(*path, os.O_RDONLY, 0)
		must(err)
		var wg sync.WaitGroup
		start()
		for g := 0; g < *n; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := alignedBuf(4096)
				r := rand.New(rand.NewPCG(uint64(g), 4))
				for !deadline() {
					for k := 0; k < 64; k++ {
						_, err := f.ReadAt(buf, r.Int64N(nblobs)*4096)
						must(err)
						ops.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		stop()
		f.Close()
	case "readblob1":
		rd, err := blobio.Open(*path, nil)
		must(err)
		var dst []byte
		r := rand.New(rand.NewPCG(9, 2))
		start()
		for !deadline() {
			for k := 0; k < 64; k++ {
				dst, err = rd.ReadBlob(r.Int64N(nblobs)*4096, dst)
				must(err)
				ops.Add(1)
			}
		}
		stop()
		rd.Close()
	case "fio", "fio1", "fiojobs":
		// fiojobs is fio's picture of 16 goroutines with a read each:
		// -n jobs (processes) at QD1, counted together.
		depth, jobs := *n, 1
		switch *mode {
		case "fio1":
			depth = 1
		case "fiojobs":
			depth, jobs = 1, *n
		}
		cmd := exec.Command("fio", "--name=r", "--filename="+*path, "--readonly", "--ioengine=io_uring", "--direct=1",
			"--rw=randread", "--norandommap", "--randrepeat=0", "--bs=4k", "--iodepth="+strconv.Itoa(depth),
			"--numjobs="+strconv.Itoa(jobs), "--group_reporting",
			"--size=256m", "--time_based", "--runtime="+strconv.FormatInt(d.Milliseconds(), 10)+"ms", "--output-format=json")
		out, err := cmd.Output()
		must(err)
		var res struct {
			Jobs []struct {
				Read struct {
					TotalIOs int64   `json:"total_ios"`
					Runtime  float64 `json:"runtime"`
				} `json:"read"`
			} `json:"jobs"`
		}
		must(json.Unmarshal(out, &res))
		ops.Store(res.Jobs[0].Read.TotalIOs)
		elapsed = time.Duration(res.Jobs[0].Read.Runtime * float64(time.Millisecond))
		used = cpu(cmd.ProcessState.SysUsage().(*syscall.Rusage))
	case "append":
		// 64 KiB appends through blobio: 65532-byte blobs and their
		// 4-byte headers, as many as fio's 375 MiB or -d allows.
		w, err := blobio.Create(*path, nil)
		must(err)
		p := make([]byte, 65536-4)
		start()
		for i := 0; i < 6000 && !deadline(); i++ {
			_, err := w.WriteBlob(p)
			must(err)
			ops.Add(1)
		}
		must(w.Close())
		stop()
		os.Remove(*path)
	case "fioappend":
		cmd := exec.Command("fio", "--name=w", "--filename="+*path, "--ioengine=io_uring", "--direct=1",
			"--rw=write", "--bs=64k", "--iodepth=4", "--size=375m", "--end_fsync=1", "--output-format=json")
		out, err := cmd.Output()
		must(err)
		var res struct {
			Jobs []struct {
				Write struct {
					TotalIOs int64   `json:"total_ios"`
					Runtime  float64 `json:"runtime"`
				} `json:"write"`
			} `json:"jobs"`
		}
		must(json.Unmarshal(out, &res))
		ops.Store(res.Jobs[0].Write.TotalIOs)
		elapsed = time.Duration(res.Jobs[0].Write.Runtime * float64(time.Millisecond))
		used = cpu(cmd.ProcessState.SysUsage().(*syscall.Rusage))
		os.Remove(*path)
	default:
		must(fmt.Errorf("mode %q", *mode))
	}
	o := ops.Load()
	fmt.Printf("%s\t%s\t%.0f\t%.2f\n", *tag, *mode, float64(o)/elapsed.Seconds(), float64(used.Microseconds())/float64(o))
}

func alignedBuf(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		panic(err)
	}
	return b
}
