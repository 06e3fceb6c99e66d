package blobio_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestLog: goroutines append at once through a Log; each blob is durable
// (Synced covers it) when Append returns, fewer fdatasyncs than blobs ran,
// and after Close every blob reads back at its offset.
func TestLog(t *testing.T) {
	const goroutines, each = 32, 60
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			path := filepath.Join(testenv.Dir(t), "log.blob")
			syncs := &opCounter{op: direct.OpSync}
			w, err := blobio.Create(path, &blobio.Options{IO: p, BufferSize: 8192, Buffers: 4, Faults: syncs})
			require.NoError(t, err)
			l := blobio.NewLog(w)
			var mu sync.Mutex
			got := map[int64][]byte{}
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range each {
						// Never empty: the Scanner on main fails on an empty last blob.
						data := record(g*each+i, 1+(g*131+i*29)%700)
						off, err := l.Append(data)
						if !assert.NoError(t, err) {
							return
						}
						hdr := blobio.HeaderSize(len(data), blobio.None)
						assert.GreaterOrEqual(t, l.Synced(), off+int64(hdr+len(data)), "Append returned before its blob was durable")
						mu.Lock()
						got[off] = data
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			n := syncs.n.Load()
			require.NoError(t, l.Close())
			t.Logf("%d blobs, %d fdatasyncs", goroutines*each, n)
			assert.Less(t, n, int64(goroutines*each), "no fdatasync covered two blobs")
			require.Len(t, got, goroutines*each, "two blobs at one offset")

			r, err := blobio.Open(path, nil)
			require.NoError(t, err)
			defer r.Close()
			s := blobio.NewScanner(r)
			scanned := 0
			for s.Scan() {
				want, ok := got[s.Offset()]
				require.True(t, ok, "a blob at %d nobody appended", s.Offset())
				require.True(t, bytes.Equal(want, s.Bytes()), "blob at %d differs", s.Offset())
				scanned++
			}
			require.NoError(t, s.Err())
			assert.Equal(t, len(got), scanned)
			_, err = l.Append([]byte("late"))
			assert.ErrorIs(t, err, blobio.ErrClosed)
		})
	}
}

// TestLogSyncFails: a failed fdatasync fails the Appends it was to cover
// and Synced stays where it was; once the cause is gone the next Append
// succeeds, its commit writes again what the failed one left, and every
// blob appended, those whose commit failed included, reads back.
func TestLogSyncFails(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			inj := &toggle{op: direct.OpSync, err: syscall.EIO}
			path := filepath.Join(testenv.Dir(t), "log.blob")
			w, err := blobio.Create(path, &blobio.Options{IO: p, Faults: inj})
			require.NoError(t, err)
			l := blobio.NewLog(w)
			_, err = l.Append([]byte("durable"))
			require.NoError(t, err)
			synced := l.Synced()
			require.Equal(t, int64(1+len("durable")), synced)

			inj.on.Store(true)
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					_, err := l.Append([]byte(fmt.Sprint("failed ", i)))
					assert.ErrorIs(t, err, syscall.EIO)
				})
			}
			wg.Wait()
			assert.Equal(t, synced, l.Synced())
			inj.on.Store(false)
			_, err = l.Append([]byte("after"))
			require.NoError(t, err, "the cause is gone")
			assert.Equal(t, w.Size(), l.Synced())
			require.NoError(t, l.Close())

			r, err := blobio.Open(path, nil)
			require.NoError(t, err)
			defer r.Close()
			var got []string
			for s := blobio.NewScanner(r); s.Scan(); {
				got = append(got, string(s.Bytes()))
			}
			assert.Len(t, got, 10)
			assert.Equal(t, "durable", got[0])
			assert.Equal(t, "after", got[9])
		})
	}
}

// TestLogCloseRace: Appends racing Close either return nil, and their
// blob is in the file, or ErrClosed.
func TestLogCloseRace(t *testing.T) {
	for round := range 10 {
		path := filepath.Join(testenv.Dir(t), fmt.Sprintf("log%d.blob", round))
		w, err := blobio.Create(path, &blobio.Options{BufferSize: 4096, NoSync: round%2 == 0})
		require.NoError(t, err)
		l := blobio.NewLog(w)
		var mu sync.Mutex
		acked := map[int64][]byte{}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					data := record(g*1000+i, 1+i%300)
					off, err := l.Append(data)
					if err != nil {
						assert.ErrorIs(t, err, blobio.ErrClosed)
						return
					}
					mu.Lock()
					acked[off] = data
					mu.Unlock()
				}
			})
		}
		for l.Synced() < 20_000 {
			runtime.Gosched()
		}
		require.NoError(t, l.Close())
		wg.Wait()
		r, err := blobio.Open(path, nil)
		require.NoError(t, err)
		for off, want := range acked {
			got, err := r.ReadBlob(off, nil)
			require.NoError(t, err, "acknowledged blob at %d", off)
			require.True(t, bytes.Equal(want, got), "acknowledged blob at %d differs", off)
		}
		require.NoError(t, r.Close())
	}
}
