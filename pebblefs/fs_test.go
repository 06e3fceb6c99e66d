//go:build unix

package pebblefs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// pattern returns n bytes that differ at every offset a test may check.
func pattern(seed uint64, n int) []byte {
	p := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

// writeAll creates name on fs and writes data to it in pieces of the
// given sizes, cycling through them.
func writeAll(t *testing.T, fsys vfs.FS, name string, data []byte, pieces ...int) vfs.File {
	t.Helper()
	f, err := fsys.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	for i, off := 0, 0; off < len(data); i++ {
		n := min(pieces[i%len(pieces)], len(data)-off)
		if _, err := f.Write(data[off : off+n]); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	return f
}

func readWhole(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestWriteReadStat(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := New(nil)
	// Pebble's writes: 4 KiB from the sstable writer's bufio, odd pieces
	// of 32 KiB WAL blocks, one large write, one byte.
	data := pattern(1, 3<<20+12345)
	name := filepath.Join(dir, "000001.sst")
	f := writeAll(t, fsys, name, data, 4096, 32768-7, 7, 1<<20+3, 1)
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != int64(len(data)) {
		t.Fatalf("Stat of the open file: size %d, want %d", fi.Size(), len(data))
	}
	if fi, err := fsys.Stat(name); err != nil || fi.Size() != int64(len(data)) {
		t.Fatalf("FS.Stat of the open file: %v, %v; want size %d", fi, err, len(data))
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second Close: %v, want fs.ErrClosed", err)
	}
	if fi, err := os.Stat(name); err != nil || fi.Size() != int64(len(data)) {
		t.Fatalf("on disk after Close: %v, %v; want size %d", fi, err, len(data))
	}
	if got := readWhole(t, fsys, name); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, differing from the %d written", len(got), len(data))
	}

	r, err := fsys.Open(name, vfs.RandomReadsOption)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if fi, err := r.Stat(); err != nil || fi.Size() != int64(len(data)) {
		t.Fatalf("Stat of the reader: %v, %v", fi, err)
	}
	// An sstable block read: any offset, a 5-byte trailer.
	p := make([]byte, 4096+5)
	if n, err := r.ReadAt(p, 1<<20+1); n != len(p) || err != nil || !bytes.Equal(p, data[1<<20+1:][:len(p)]) {
		t.Fatalf("ReadAt: %d, %v", n, err)
	}
	// Past the end: io.EOF with what there is.
	n, err := r.ReadAt(p, int64(len(data)-10))
	if n != 10 || err != io.EOF || !bytes.Equal(p[:10], data[len(data)-10:]) {
		t.Fatalf("ReadAt across the end: %d, %v; want 10, io.EOF", n, err)
	}
	if n, err := r.ReadAt(p, int64(len(data))); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at the end: %d, %v; want 0, io.EOF", n, err)
	}
	if fd := r.Fd(); fd == vfs.InvalidFd {
		t.Fatal("reader's Fd is InvalidFd")
	}
}

func TestConcurrentReadAt(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := New(nil)
	data := pattern(2, 2<<20+777)
	name := filepath.Join(dir, "000002.sst")
	f := writeAll(t, fsys, name, data, 64<<10)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := fsys.Open(name, vfs.RandomReadsOption)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			p := make([]byte, 40<<10)
			for range 200 {
				off := rng.IntN(len(data))
				n := 1 + rng.IntN(len(p))
				got, err := r.ReadAt(p[:n], int64(off))
				want := data[off:min(off+n, len(data))]
				if got != len(want) || (err != nil && err != io.EOF) || !bytes.Equal(p[:got], want) {
					t.Errorf("ReadAt(%d bytes at %d): %d, %v", n, off, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestCreateReplacesInode checks that Create over an existing file makes
// a new inode: a hard link to the old one (a checkpoint's sstable) keeps
// its bytes.
func TestCreateReplacesInode(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := New(nil)
	old := pattern(3, 100<<10)
	name, link := filepath.Join(dir, "000003.sst"), filepath.Join(dir, "checkpoint.sst")
	if err := writeAll(t, fsys, name, old, 4096).Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Link(name, link); err != nil {
		t.Fatal(err)
	}
	if err := writeAll(t, fsys, name, []byte("new"), 3).Close(); err != nil {
		t.Fatal(err)
	}
	if got := readWhole(t, fsys, link); !bytes.Equal(got, old) {
		t.Fatalf("the link changed: %d bytes", len(got))
	}
	if got := readWhole(t, fsys, name); string(got) != "new" {
		t.Fatalf("the new file holds %q", got)
	}
}

// TestCreateFails: a Create or ReuseForWrite that fails returns a nil
// vfs.File, not one holding a nil file (Pebble closes what it gets
// back, and that one's Close dereferenced nil), so pebble.Open reports
// the error a user would see on vfs.Default instead of panicking.
func TestCreateFails(t *testing.T) {
	dir := testenv.Dir(t)
	missing := filepath.Join(dir, "missing", "000001.log")
	for _, c := range []struct {
		what string
		fsys vfs.FS
		name string
		want error
	}{
		{"no directory", New(nil), missing, fs.ErrNotExist},
		{"invalid options", New(&Options{Slow: &fileio.SlowPolicy{}}), filepath.Join(dir, "000002.log"), fileio.ErrInvalidOptions},
	} {
		f, err := c.fsys.Create(c.name, vfs.WriteCategoryUnspecified)
		if f != nil || !errors.Is(err, c.want) {
			t.Errorf("%s: Create returned %#v, %v; want nil, %v", c.what, f, err, c.want)
		}
		old := filepath.Join(dir, "old-"+c.what)
		if err := os.WriteFile(old, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err = c.fsys.ReuseForWrite(old, c.name, vfs.WriteCategoryUnspecified)
		if f != nil || !errors.Is(err, c.want) {
			t.Errorf("%s: ReuseForWrite returned %#v, %v; want nil, %v", c.what, f, err, c.want)
		}
		db, err := pebble.Open(filepath.Join(dir, "db-"+c.what), &pebble.Options{FS: c.fsys})
		if err == nil {
			db.Close()
			if c.what != "no directory" { // Pebble makes its own directory
				t.Errorf("%s: pebble.Open succeeded", c.what)
			}
		}
	}
}

func TestReuseForWrite(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := New(nil)
	oldName, newName := filepath.Join(dir, "000004.log"), filepath.Join(dir, "000005.log")
	if err := writeAll(t, fsys, oldName, pattern(4, 200<<10), 32<<10).Close(); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.ReuseForWrite(oldName, newName, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("record")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(oldName); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old WAL after reuse: %v, want not exist", err)
	}
	// What Pebble's WAL reader sees: the new records, then the end.
	if got := readWhole(t, fsys, newName); string(got) != "record" {
		t.Fatalf("reused WAL holds %d bytes, want the 6 written", len(got))
	}
	if _, err := fsys.ReuseForWrite(oldName, newName, vfs.WriteCategoryUnspecified); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reusing a missing file: %v, want not exist", err)
	}
}

// TestReadWhileWriting reads a file that this process is still writing,
// as Pebble's checkpoint copies the live MANIFEST and WAL: what was
// written must be read back, never the zeros or nothing of a buffer not
// yet on disk.
func TestReadWhileWriting(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := New(nil)
	name := filepath.Join(dir, "MANIFEST-000001")
	data := pattern(5, 300<<10+11)
	w := writeAll(t, fsys, name, data[:1000], 1000)

	r, err := fsys.Open(name, vfs.SequentialReadsOption)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if fi, err := r.Stat(); err != nil || fi.Size() != 1000 {
		t.Fatalf("Stat of a live file: %v, %v; want 1000", fi, err)
	}
	p := make([]byte, 1000)
	if n, err := io.ReadFull(r, p); n != 1000 || err != nil || !bytes.Equal(p, data[:1000]) {
		t.Fatalf("Read of the unsynced prefix: %d, %v", n, err)
	}
	if n, err := r.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("Read at the live end: %d, %v; want io.EOF", n, err)
	}
	// The writer goes on; the reader follows, through Read and ReadAt.
	if _, err := w.Write(data[1000:]); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(rest, data[1000:]) {
		t.Fatalf("Read after more writes: %d bytes, %v", len(rest), err)
	}
	q := make([]byte, 5000)
	if n, err := r.ReadAt(q, 100<<10); n != len(q) || err != nil || !bytes.Equal(q, data[100<<10:][:len(q)]) {
		t.Fatalf("ReadAt: %d, %v", n, err)
	}
	// ReadAt on the writing handle itself.
	if n, err := w.ReadAt(q, 200<<10); n != len(q) || err != nil || !bytes.Equal(q, data[200<<10:][:len(q)]) {
		t.Fatalf("ReadAt on the writer: %d, %v", n, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed: the reader now reads the finished file.
	if n, err := r.ReadAt(q[:11], int64(len(data)-11)); n != 11 || err != nil || !bytes.Equal(q[:11], data[len(data)-11:]) {
		t.Fatalf("ReadAt after the writer closed: %d, %v", n, err)
	}
	if got := readWhole(t, fsys, name); !bytes.Equal(got, data) {
		t.Fatalf("whole file: %d bytes", len(got))
	}
}

// TestReadWhileWritingConcurrent copies a file while another goroutine
// writes it, as a checkpoint copies the WAL that Pebble keeps appending:
// every copy is a prefix of what was written.
func TestReadWhileWritingConcurrent(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := New(nil)
	name := filepath.Join(dir, "000006.log")
	data := pattern(6, 4<<20)
	w, err := fsys.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for off := 0; off < len(data); off += 32 << 10 {
			if _, err := w.Write(data[off : off+32<<10]); err != nil {
				done <- err
				return
			}
			if off%(256<<10) == 0 {
				if err := w.SyncData(); err != nil {
					done <- err
					return
				}
			}
		}
		done <- w.Close()
	}()
	for copies := 0; ; copies++ {
		got := readWhole(t, fsys, name)
		if !bytes.Equal(got, data[:len(got)]) {
			t.Fatalf("copy %d: %d bytes, not a prefix of what was written", copies, len(got))
		}
		if len(got) == len(data) {
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestNames(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := New(nil)
	sub := fsys.PathJoin(dir, "a", "b")
	if err := fsys.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeAll(t, fsys, fsys.PathJoin(sub, "x"), []byte("x"), 1).Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(fsys.PathJoin(sub, "x"), fsys.PathJoin(sub, "y")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Link(fsys.PathJoin(sub, "y"), fsys.PathJoin(sub, "z")); err != nil {
		t.Fatal(err)
	}
	names, err := fsys.List(sub)
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"y", "z"}) {
		t.Fatalf("List: %v, %v", names, err)
	}
	d, err := fsys.OpenDir(sub)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if fsys.PathBase(sub) != "b" || fsys.PathDir(sub) != fsys.PathJoin(dir, "a") {
		t.Fatalf("PathBase, PathDir of %s: %s, %s", sub, fsys.PathBase(sub), fsys.PathDir(sub))
	}
	if du, err := fsys.GetDiskUsage(dir); err != nil || du.AvailBytes > du.TotalBytes { // ramfs: all zero
		t.Fatalf("GetDiskUsage: %+v, %v", du, err)
	}
	if err := fsys.Remove(fsys.PathJoin(sub, "z")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.RemoveAll(fsys.PathJoin(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(sub); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat after RemoveAll: %v", err)
	}
	if vfs.Root(fsys) != vfs.Default {
		t.Fatal("vfs.Root(pebblefs) is not vfs.Default")
	}
}

func TestLock(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := New(nil)
	name := fsys.PathJoin(dir, "LOCK")
	l, err := fsys.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Lock(name); err == nil {
		t.Fatal("a second Lock of a held lock succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = fsys.Lock(name)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	l.Close()
}

// TestUnsupported checks the calls pebblefs refuses, with vfs's error.
func TestUnsupported(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := New(nil)
	name := fsys.PathJoin(dir, "f")
	w := writeAll(t, fsys, name, []byte("abc"), 3)
	if _, err := w.WriteAt([]byte("x"), 0); !errors.Is(err, vfs.ErrUnsupported) {
		t.Fatalf("WriteAt on a created file: %v", err)
	}
	if _, err := w.Read(make([]byte, 1)); !errors.Is(err, vfs.ErrUnsupported) {
		t.Fatalf("Read on a created file: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	r, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("x")); !errors.Is(err, vfs.ErrUnsupported) {
		t.Fatalf("Write on an opened file: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(make([]byte, 1), 0); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("ReadAt after Close: %v", err)
	}
	// OpenReadWrite (the secondary cache's) is vfs.Default's: WriteAt works.
	rw, err := fsys.OpenReadWrite(fsys.PathJoin(dir, "cache"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.WriteAt([]byte("abc"), 4096); err != nil {
		t.Fatal(err)
	}
	rw.Close()
}

// TestCloseWhileReadingLive closes readers of a live file while other
// goroutines read past what is synced (each read may sync the writer and
// reopen the reader): no read may fail but with fs.ErrClosed, and no
// descriptor may outlive the files.
func TestCloseWhileReadingLive(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := New(nil)
	before := testenv.OpenFDs()
	name := filepath.Join(dir, "MANIFEST-000009")
	data := pattern(9, 1<<20)
	w, err := fsys.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		if _, err := w.Write(data[round*(32<<10) : (round+1)*(32<<10)]); err != nil {
			t.Fatal(err)
		}
		r, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				p := make([]byte, 4096)
				for i := range 50 {
					off := int64((g*50 + i) * 100)
					n, err := r.ReadAt(p, off)
					if errors.Is(err, fs.ErrClosed) {
						return
					}
					if (err != nil && err != io.EOF) || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
						t.Errorf("ReadAt(%d): %d, %v", off, n, err)
						return
					}
				}
			})
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if after := testenv.OpenFDs(); after > before {
		t.Fatalf("%d descriptors open before, %d after", before, after)
	}
}
