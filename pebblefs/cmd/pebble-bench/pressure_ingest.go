//go:build unix

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

	"github.com/cockroachdb/pebble/v2"
	"github.com/dio-storage/dio/pebblefs"
)

// ingestChild is the pressure subcommand's Pebble: it joins the cgroup,
// opens a store on engine under c.dir, prints "ready", and commits
// batches of c.batch values with pebble.NoSync from one goroutine until
// its stdin closes; each "mark" line on stdin is answered with the bytes
// (keys and values) committed so far and the time, as JSON. It closes and
// removes the store before it exits.
func ingestChild(c pressureConfig, engine string) error {
	if _, err := joinCgroup(); err != nil {
		return err
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
