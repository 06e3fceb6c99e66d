//go:build linux

package crashtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/crashtest"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fileio"
	"golang.org/x/sys/unix"
)

// Real I/O errors through the kernel: the disk fails chosen sectors with
// EIO on every read until they are written again, or a chosen write or
// flush, under a real ext4 and xfs.

func newDisk(t *testing.T, f crashtest.FS) *crashtest.Disk {
	t.Helper()
	if err := crashtest.Available(f); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true, but: %v", err)
		}
		t.Skip(err)
	}
	d, err := crashtest.NewDisk(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing the disk: %v", err)
		}
	})
	return d
}

// wantSectorError checks that err is a *direct.SectorError naming exactly
// [off, off+n) and matching EIO.
func wantSectorError(t *testing.T, what string, err error, off, n int64) {
	t.Helper()
	var se *direct.SectorError
	switch {
	case !errors.As(err, &se):
		t.Fatalf("%s: %v, want a *direct.SectorError", what, err)
	case se.Off != off || int64(se.Len) != n:
		t.Fatalf("%s: %v names bytes %d-%d, want %d-%d", what, err, se.Off, se.Off+int64(se.Len), off, off+n)
	case !errors.Is(err, syscall.EIO):
		t.Fatalf("%s: %v does not match EIO", what, err)
	}
}

func TestLatentSectorsFileio(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			d := newDisk(t, f)
			sec := int64(d.Sector())
			path := filepath.Join(d.Dir(), "data")
			data := stream(7, 1<<20)
			w, err := fileio.Create(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			bad, n := 300<<10+3*sec, 2*sec
			spans, err := d.FailReads(path, bad, n)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("file bytes %d-%d are disk bytes %v", bad, bad+n, spans)
			r, err := fileio.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()

			// ReadAt of the whole file: the bytes before the bad
			// sectors, counted (io.ReaderAt).
			p := make([]byte, len(data))
			got, err := r.ReadAt(p, 0)
			wantSectorError(t, "fileio ReadAt", err, bad, n)
			if int64(got) != bad {
				t.Fatalf("ReadAt returned %d bytes, want the %d before the bad sectors", got, bad)
			}
			if i := firstDiff(p[:bad], data[:bad]); i >= 0 {
				t.Fatalf("ReadAt: byte %d, before the bad sectors, is not the file's", i)
			}
			// direct.File.ReadAt also reads every good sector after
			// them into p.
			directReadAround(t, path, data, bad, n)
			// A read of its own beside them passes.
			if _, err := r.ReadAt(p[:sec], bad+n); err != nil || !bytes.Equal(p[:sec], data[bad+n:bad+n+sec]) {
				t.Fatalf("ReadAt just past the bad sectors: %v", err)
			}

			// Sequential: every byte before them, then the error.
			s, err := r.NewSequential(0)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, err = io.Copy(&buf, s)
			s.Close()
			wantSectorError(t, "Sequential", err, bad, n)
			if int64(buf.Len()) != bad || !bytes.Equal(buf.Bytes(), data[:bad]) {
				t.Fatalf("Sequential returned %d bytes before its error, want the %d before the bad sectors", buf.Len(), bad)
			}
			if c := d.Counts(); c.ReadErrors == 0 {
				t.Fatalf("the disk failed no read: %+v", c)
			}

			// Written again, the sectors read.
			rewrite(t, path, bad, data[bad:bad+n])
			if _, err := r.ReadAt(p, 0); err != nil || !bytes.Equal(p, data) {
				t.Fatalf("after the sectors were rewritten: %v", err)
			}
		})
	}
}

// directReadAround reads the whole file at path with direct.File.ReadAt
// and wants the bytes before [bad, bad+n) counted, that range named by a
// *SectorError, and every byte after it read too.
func directReadAround(t *testing.T, path string, data []byte, bad, n int64) {
	t.Helper()
	f, err := direct.Open(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := aligned.New(len(data), f.Alignment().Memory)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	p := b.Bytes()
	got, err := f.ReadAt(p, 0)
	wantSectorError(t, "direct ReadAt", err, bad, n)
	if int64(got) != bad {
		t.Fatalf("direct ReadAt returned %d bytes, want the %d before the bad sectors", got, bad)
	}
	if i := firstDiff(p[:bad], data[:bad]); i >= 0 {
		t.Fatalf("direct ReadAt: byte %d, before the bad sectors, is not the file's", i)
	}
	if i := firstDiff(p[bad+n:], data[bad+n:]); i >= 0 {
		t.Fatalf("direct ReadAt: byte %d, after the bad sectors, is not the file's", bad+n+int64(i))
	}
}

// rewrite writes p at off of the file at path with O_DIRECT.
func rewrite(t *testing.T, path string, off int64, p []byte) {
	t.Helper()
	f, err := direct.Open(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := aligned.New(len(p), f.Alignment().Memory)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	copy(b.Bytes(), p)
	if _, err := f.WriteAt(b.Bytes(), off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestLatentSectorsBlobio(t *testing.T) {
	for _, f := range filesystems {
		for _, sum := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/checksum=%v", f, sum), func(t *testing.T) {
				d := newDisk(t, f)
				sec := int64(d.Sector())
				path := filepath.Join(d.Dir(), "blobs")
				o := &blobio.Options{Checksum: sum}
				w, err := blobio.Create(path, o)
				if err != nil {
					t.Fatal(err)
				}
				var wrote blobs
				for i := 0; i < 400; i++ {
					p := bytes.Repeat([]byte{byte(i%250 + 1)}, 1+(i*733)%20000)
					off, err := w.WriteBlob(p)
					if err != nil {
						t.Fatal(err)
					}
					wrote = append(wrote, blob{off, p})
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				// A blob in the middle, larger than two sectors: its
				// second sector goes bad.
				k := len(wrote) / 2
				for int64(len(wrote[k].data)) < 3*sec {
					k++
				}
				b := wrote[k]
				bad := (b.off/sec + 1) * sec
				if _, err := d.FailReads(path, bad, sec); err != nil {
					t.Fatal(err)
				}
				r, err := blobio.Open(path, o)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()

				_, err = r.ReadBlob(b.off, nil)
				wantSectorError(t, fmt.Sprintf("ReadBlob of the blob at %d", b.off), err, bad, sec)
				// Every blob that does not reach into the sector reads.
				var others []int64
				for i, o := range wrote {
					end := o.off + int64(len(o.data)) + 8
					if end <= bad || o.off >= bad+sec {
						others = append(others, o.off)
						p, err := r.ReadBlob(o.off, nil)
						if err != nil || !bytes.Equal(p, o.data) {
							t.Fatalf("blob %d at %d, clear of the bad sector: %v", i, o.off, err)
						}
					}
				}
				// ReadBlobs merges neighbours into reads that cover
				// the bad sector, and still reads them all.
				if err := r.ReadBlobs(others, func(i int, p []byte) error {
					if o, _ := wrote.at(others[i]); !bytes.Equal(p, o.data) {
						return fmt.Errorf("blob at %d: other bytes", others[i])
					}
					return nil
				}); err != nil {
					t.Fatalf("ReadBlobs of the %d blobs clear of the bad sector: %v", len(others), err)
				}
				all := make([]int64, len(wrote))
				for i, o := range wrote {
					all[i] = o.off
				}
				err = r.ReadBlobs(all, func(int, []byte) error { return nil })
				var be *blobio.BlobError
				if !errors.As(err, &be) || be.Offset != b.off {
					t.Fatalf("ReadBlobs of every blob: %v, want a *BlobError at %d", err, b.off)
				}
				wantSectorError(t, "ReadBlobs", err, bad, sec)

				// The Scanner: every blob before it, then the error.
				sc := blobio.NewScanner(r)
				i := 0
				for ; sc.Scan(); i++ {
					if sc.Offset() != wrote[i].off || !bytes.Equal(sc.Bytes(), wrote[i].data) {
						t.Fatalf("scan: blob %d at %d is not the one written", i, sc.Offset())
					}
				}
				wantSectorError(t, "Scanner", sc.Err(), bad, sec)
				if i != k {
					t.Fatalf("the scan returned %d blobs before its error, want the %d before the bad sector", i, k)
				}
				sc.Close()
			})
		}
	}
}

// TestWriteFailureRetried fails a fileio Writer's write on the disk: the
// Writer with Options.Retry writes it again, its Sync returns nil, and
// every byte it acknowledged is on the disk after a remount.
func TestWriteFailureRetried(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			d := newDisk(t, f)
			path := filepath.Join(d.Dir(), "data")
			var retries atomic.Int64
			w, err := fileio.Create(path, &fileio.Options{Retry: &fileio.RetryPolicy{
				MinDelay: time.Millisecond,
				OnRetry:  func(error) { retries.Add(1) },
			}})
			if err != nil {
				t.Fatal(err)
			}
			data := stream(8, 4<<20)
			half := 1 << 20
			// Allocate the file's blocks now, so that the disk
			// bytes under its next writes are known before they
			// are issued.
			if err := syscall.Fallocate(int(w.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, int64(len(data))); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(data[:half]); err != nil {
				t.Fatal(err)
			}
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			// The next writes land in the blocks the Writer grew the
			// file by: fail the first one there.
			spans, err := d.FailWrites(path, int64(half), 64<<10, 1)
			if err != nil {
				t.Fatal(err)
			}
			before := d.Counts()
			if _, err := w.Write(data[half:]); err != nil {
				t.Fatal(err)
			}
			if err := w.Sync(); err != nil {
				t.Fatalf("Sync after a failed write, with Retry: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			failed := d.Counts().WriteErrors - before.WriteErrors
			t.Logf("disk bytes %v: %d writes failed, %d retries", spans, failed, retries.Load())
			if failed != 1 || retries.Load() == 0 {
				t.Fatalf("%d writes failed, %d retries: the fault did not reach the Writer", failed, retries.Load())
			}
			checkOnDisk(t, d, path, data, 0)
		})
	}
}

// checkOnDisk remounts d and wants the file at path to hold data, read
// with Options.Size size (0: the file's).
func checkOnDisk(t *testing.T, d *crashtest.Disk, path string, data []byte, size int64) {
	t.Helper()
	if err := d.Remount(); err != nil {
		t.Fatal(err)
	}
	r, err := fileio.Open(path, &fileio.Options{Size: size})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := make([]byte, len(data))
	if n, err := r.ReadAt(p, 0); err != nil || !bytes.Equal(p, data) || r.Size() != int64(len(data)) {
		t.Fatalf("after a remount: %d of %d bytes read (%v), size %d, first difference at %d", n, len(data), err, r.Size(), firstDiff(p, data))
	}
}

// TestFlushFailureRetried fails the disk's flush under a Sync whose
// fdatasync commits no metadata (its bytes overwrite a block already
// written): the Writer with Options.Retry syncs again, and nothing it
// acknowledged is lost.
func TestFlushFailureRetried(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			d := newDisk(t, f)
			path := filepath.Join(d.Dir(), "data")
			var retries atomic.Int64
			w, err := fileio.Create(path, &fileio.Options{Retry: &fileio.RetryPolicy{
				MinDelay: time.Millisecond,
				OnRetry:  func(error) { retries.Add(1) },
			}})
			if err != nil {
				t.Fatal(err)
			}
			data := stream(9, 64<<10+100)
			if _, err := w.Write(data[:64<<10+50]); err != nil {
				t.Fatal(err)
			}
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			// 50 bytes more, in the tail's block, already written.
			d.FailFlushes(1)
			before := d.Counts()
			if _, err := w.Write(data[64<<10+50:]); err != nil {
				t.Fatal(err)
			}
			if err := w.Sync(); err != nil {
				t.Fatalf("Sync after a failed flush, with Retry: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			failed := d.Counts().FlushErrors - before.FlushErrors
			t.Logf("%d flushes failed, %d retries", failed, retries.Load())
			if failed != 1 || retries.Load() == 0 {
				t.Fatalf("%d flushes failed, %d retries: the fault did not reach the Writer", failed, retries.Load())
			}
			checkOnDisk(t, d, path, data, 0)
		})
	}
}

// TestFlushFailureInCommit fails the disk's flush under a Sync that must
// commit the filesystem's journal (its bytes went to new blocks): ext4
// aborts its journal and goes read-only, xfs shuts down, so no retry can
// succeed and the Writer's Sync fails (after retrying EIO until its
// Context ends). What was synced before is still there once the disk is
// mounted again.
//
// Which flush fails is the kernel's timing: when the journal committed
// the new blocks' metadata before the Sync (ext4 then flushes apart,
// after the commit), the failed flush leaves the journal whole and the
// Writer's retry succeeds. Then Sync must have retried and every byte
// must be on the disk, and the test tries again on a new disk, up to
// flushCommitTries times, until the flush fails inside a commit.
func TestFlushFailureInCommit(t *testing.T) {
	const flushCommitTries = 5
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			for try := 1; ; try++ {
				if flushFailsCommit(t, f) {
					return
				}
				if try == flushCommitTries {
					t.Fatalf("in %d tries the failed flush never fell inside a journal commit", try)
				}
			}
		})
	}
}

// flushFailsCommit runs TestFlushFailureInCommit once on a new disk of
// f, reporting false when the failed flush fell outside a journal
// commit and the Writer's retry made everything durable.
func flushFailsCommit(t *testing.T, f crashtest.FS) bool {
	t.Helper()
	d := newDisk(t, f)
	path := filepath.Join(d.Dir(), "data")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var retries atomic.Int64
	w, err := fileio.Create(path, &fileio.Options{Retry: &fileio.RetryPolicy{
		Context:  ctx,
		MinDelay: time.Millisecond,
		OnRetry:  func(error) { retries.Add(1) },
	}})
	if err != nil {
		t.Fatal(err)
	}
	data := stream(10, 2<<20)
	if _, err := w.Write(data[:1<<20]); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := w.Synced()
	d.FailFlushes(1)
	_, werr := w.Write(data[1<<20:])
	serr := w.Sync()
	cerr := w.Close()
	t.Logf("Write: %v; Sync: %v (%d retries); Close: %v", werr, serr, retries.Load(), cerr)
	if failed := d.Counts().FlushErrors; failed != 1 {
		t.Fatalf("Sync returned %v with %d flushes failed under it, want 1", serr, failed)
	}
	if serr == nil {
		if werr != nil || cerr != nil || retries.Load() == 0 {
			t.Fatalf("Sync succeeded after a failed flush with %d retries (Write: %v, Close: %v)", retries.Load(), werr, cerr)
		}
		checkOnDisk(t, d, path, data, 0)
		return false
	}
	checkOnDisk(t, d, path, data[:synced], synced)
	return true
}
