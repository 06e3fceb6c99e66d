//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/internal/testenv"
	"github.com/dio-storage/dio/pebblefs"
)

// TestOneliner: the one-liner writes, reads every key back with its
// value's size (oneliner fails otherwise), with and without reopening
// the store on a new FS, and leaves nothing behind.
func TestOneliner(t *testing.T) {
	dir := testenv.Dir(t)
	for _, reopen := range []bool{false, true} {
		for name, newFS := range map[string]func() vfs.FS{
			"default":  func() vfs.FS { return vfs.Default },
			"pebblefs": func() vfs.FS { return pebblefs.New(nil) },
		} {
			store := filepath.Join(dir, name)
			r, err := oneliner(newFS, reopen, store, 2000, 100)
			if err != nil {
				t.Fatalf("%s, reopen %v: %v", name, reopen, err)
			}
			if r.Reads != 2000 || r.ReadsPerSec <= 0 {
				t.Fatalf("%s, reopen %v: %+v", name, reopen, r)
			}
			if _, err := os.Stat(store); !os.IsNotExist(err) {
				t.Fatalf("%s, reopen %v: the store is left behind (%v)", name, reopen, err)
			}
		}
	}
}
