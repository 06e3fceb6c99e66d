package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/dio-storage/dio/pebblefs"
	"golang.org/x/sys/unix"
)

// ingestChild is the pressure subcommand's Pebble: it joins the cgroup,
// opens a store on engine under c.dir, prints "ready", and commits
// batches of c.batch values with pebble.NoSync from one goroutine until
// its stdin closes; each "mark" line on stdin is answered with the bytes
// (keys and values) committed so far and the time, as JSON. It closes and
// removes the store before it exits.
func ingestChild(c pressureConfig, engine string) error {
	if cg := cgroupFromEnv(); cg != nil {
		if err := cg.join(os.Getpid()); err != nil {
			return fmt.Errorf("joining %s: %w", cg.dir, err)
		}
	}
	runtime.GOMAXPROCS(c.procs)
	dir := filepath.Join(c.dir, engine)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cache := pebble.NewCache(c.cache)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{FS: engineFS(engine, pebblefs.Options{}), Cache: cache, Logger: quiet{}})
	if err != nil {
		return err
	}
	fmt.Println("ready")

	var (
		committed atomic.Int64
		stop      atomic.Bool
		werr      error
		wg        sync.WaitGroup
	)
	start := time.Now()
	wg.Go(func() {
		r := rand.New(rand.NewPCG(1, uint64(start.UnixNano())))
		val := make([]byte, c.value+64)
		for i := range val {
			val[i] = byte(r.Uint32())
		}
		var key []byte
		for n := uint64(0); !stop.Load(); {
			b := db.NewBatch()
			size := 0
			for range c.batch {
				key = ycsbKey(key, n)
				n++
				off := r.IntN(64)
				if werr = b.Set(key, val[off:off+c.value], nil); werr != nil {
					return
				}
				size += len(key) + c.value
			}
			werr = b.Commit(pebble.NoSync)
			b.Close()
			if werr != nil {
				return
			}
			committed.Add(int64(size))
		}
	})
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		if err := enc.Encode(ingestMark{Bytes: committed.Load(), Nanos: time.Since(start).Nanoseconds()}); err != nil {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if cerr := db.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// resident returns the share of the file at path in the page cache.
func resident(path string) float64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) / float64(len(vec))
}

// dropCache drops f's clean pages from the page cache.
func dropCache(f *os.File) error {
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
