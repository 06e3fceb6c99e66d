package pebblefs

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/testenv"
	"golang.org/x/sys/unix"
)

// openFlags returns, for each file under dir this process has open, the
// flags /proc/self/fdinfo gives its descriptors.
func openFlags(t *testing.T, dir string) map[string][]int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	got := make(map[string][]int)
	for _, e := range fds {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(target, dir+"/") {
			continue
		}
		f, err := os.Open("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue // closed meanwhile
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			if v, ok := strings.CutPrefix(s.Text(), "flags:"); ok {
				flags, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
				if err != nil {
					t.Fatalf("fdinfo %s: %q: %v", e.Name(), s.Text(), err)
				}
				got[filepath.Base(target)] = append(got[filepath.Base(target)], int(flags))
			}
		}
		f.Close()
	}
	return got
}

// resident returns how many bytes of the file at path sit in the page
// cache: mincore over a mapping, which faults nothing in.
func resident(t *testing.T, path string) (cached, size int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0, 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (fi.Size()+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	for _, v := range vec {
		cached += int64(v&1) * page
	}
	return min(cached, fi.Size()), fi.Size()
}

// TestDirectLive checks what the issue promises of a running Pebble: its
// live WAL, MANIFEST and sstables are open with O_DIRECT (ramfs, which
// refuses it, gets std-fs), and its sstables leave under 2% of their
// size in the page cache.
func TestDirectLive(t *testing.T) {
	dir := testenv.Dir(t)
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	db, err := pebble.Open(dir, pebbleOptions(New(nil)))
	if err != nil {
		t.Fatal(err)
	}
	const n = 8000
	for i := range n {
		if err := db.Set(key(i), value(i, 0), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := db.Set(key(i), value(i, 1), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	// An iterator holds sstables open while fdinfo is read.
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for it.First(); it.Valid(); it.Next() {
		count++
	}
	if count != n {
		t.Fatalf("iterator: %d keys, want %d", count, n)
	}

	flags := openFlags(t, dir)
	var kinds = map[string]int{}
	for name, fl := range flags {
		kind := ""
		switch {
		case strings.HasSuffix(name, ".sst"):
			kind = "sstable"
		case strings.HasSuffix(name, ".log"):
			kind = "WAL"
		case strings.HasPrefix(name, "MANIFEST-"):
			kind = "MANIFEST"
		default:
			continue // LOCK, directories: vfs.Default's
		}
		kinds[kind]++
		for _, f := range fl {
			if got, want := f&unix.O_DIRECT != 0, !testenv.RejectsDirect(); got != want {
				t.Errorf("%s (%s) open with flags %#o: O_DIRECT %v, want %v", name, kind, f, got, want)
			}
		}
	}
	for _, kind := range []string{"sstable", "WAL", "MANIFEST"} {
		if kinds[kind] == 0 {
			t.Errorf("no %s open under %s: %v", kind, dir, flags)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(t.Context(), key(0), key(n), true); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	fsName, _ := direct.Filesystem(dir)
	var cached, size int64
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	for _, p := range ssts {
		c, s := resident(t, p)
		cached, size = cached+c, size+s
	}
	t.Logf("%s: %d sstables, %d bytes, %d in the page cache", fsName, len(ssts), size, cached)
	switch {
	case size == 0:
		t.Fatal("no sstables")
	case fsName == "tmpfs" || fsName == "ramfs" || testenv.RejectsDirect():
		// The page cache is where these filesystems keep files.
	case fsName == "btrfs":
		// btrfs may read part of a direct read through the page cache.
	case cached*50 > size:
		t.Errorf("sstables leave %d of their %d bytes in the page cache, over 2%%", cached, size)
	}
}
