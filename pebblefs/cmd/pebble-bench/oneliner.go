//go:build unix

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/pebblefs"
	"github.com/dustin/go-humanize"
)

// onelinerMain runs the README's one-liner as a new user would: Pebble
// opened with nothing set but Options.FS (pebblefs.New(nil), or
// vfs.Default), KEYS keys written and flushed, then KEYS point reads of
// them at random, one goroutine; it prints each engine's reads/s. With
// -reopen the store is closed and opened again, on a new FS, between
// the writes and the reads, as a service restarted reads a store it
// did not write in this process (vfs.Default's page cache keeps what it
// held; pebblefs starts with nothing in memory).
//
//	pebble-bench oneliner [-keys 200000] [-value 100] [-rounds 3] [-reopen] [-json] DIR
func onelinerMain(args []string) error {
	fs := flag.NewFlagSet("pebble-bench oneliner", flag.ContinueOnError)
	keys := fs.Int("keys", 200_000, "keys written, then read")
	value := fs.String("value", "100", "value size")
	rounds := fs.Int("rounds", 3, "rounds, the engines alternating first")
	asJSON := fs.Bool("json", false, "one JSON object per engine and round")
	reopen := fs.Bool("reopen", false, "close the store and open it again on a new FS before the reads")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one DIR, got %d arguments", fs.NArg())
	}
	vs, err := humanize.ParseBytes(*value)
	if err != nil {
		return err
	}
	engines := []string{"default", "pebblefs"}
	for round := range *rounds {
		order := engines
		if round%2 == 1 {
			order = []string{engines[1], engines[0]}
		}
		for _, e := range order {
			newFS := func() vfs.FS { return vfs.Default }
			if e == "pebblefs" {
				newFS = func() vfs.FS { return pebblefs.New(nil) }
			}
			r, err := oneliner(newFS, *reopen, filepath.Join(fs.Arg(0), e), *keys, int(vs))
			if err != nil {
				return fmt.Errorf("%s: %w", e, err)
			}
			r.FS, r.Round = e, round+1
			if *asJSON {
				if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
					return err
				}
				continue
			}
			fmt.Printf("round %d %-8s write %6.2f s  %d reads %6.2f s  %8.0f reads/s\n", r.Round, e, r.WriteSeconds, r.Reads, r.ReadSeconds, r.ReadsPerSec)
		}
	}
	return nil
}

type onelinerResult struct {
	FS           string  `json:"fs"`
	Round        int     `json:"round"`
	Reads        int     `json:"reads"`
	WriteSeconds float64 `json:"write_s"`
	ReadSeconds  float64 `json:"read_s"`
	ReadsPerSec  float64 `json:"reads_s"`
}

// oneliner writes keys keys of value bytes into a new store at dir on
// newFS(), as the README's example does, then reads each once in random
// order, after opening the store again on a new newFS() if reopen.
func oneliner(newFS func() vfs.FS, reopen bool, dir string, keys, value int) (onelinerResult, error) {
	if err := os.RemoveAll(dir); err != nil {
		return onelinerResult{}, err
	}
	defer os.RemoveAll(dir)
	open := func() (*pebble.DB, error) { return pebble.Open(dir, &pebble.Options{FS: newFS(), Logger: quiet{}}) }
	db, err := open()
	if err != nil {
		return onelinerResult{}, err
	}
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	r := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, value)
	var key []byte
	t0 := time.Now()
	b := db.NewBatch()
	for i := range keys {
		for j := range val {
			val[j] = byte(r.Uint32())
		}
		key = ycsbKey(key, uint64(i))
		if err := b.Set(key, val, nil); err != nil {
			return onelinerResult{}, err
		}
		if b.Len() > 1<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return onelinerResult{}, err
			}
			b = db.NewBatch()
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return onelinerResult{}, err
	}
	if err := db.Flush(); err != nil {
		return onelinerResult{}, err
	}
	written := time.Since(t0)
	if reopen {
		err := db.Close()
		db = nil
		if err != nil {
			return onelinerResult{}, err
		}
		if db, err = open(); err != nil {
			return onelinerResult{}, err
		}
	}
	t1 := time.Now()
	for _, i := range r.Perm(keys) {
		key = ycsbKey(key, uint64(i))
		v, closer, err := db.Get(key)
		if err != nil {
			return onelinerResult{}, fmt.Errorf("key %d: %w", i, err)
		}
		if len(v) != value {
			return onelinerResult{}, fmt.Errorf("key %d: %d bytes", i, len(v))
		}
		closer.Close()
	}
	read := time.Since(t1)
	return onelinerResult{Reads: keys, WriteSeconds: written.Seconds(), ReadSeconds: read.Seconds(), ReadsPerSec: float64(keys) / read.Seconds()}, nil
}
