//go:build unix

package pebblefs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// openRead opens name and returns it with whether its reads come from
// fresh memory, all of it in memory already.
func openRead(t *testing.T, fsys *FS, name string) (*readFile, bool) {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	r := f.(*readFile)
	return r, r.fresh.Load() != nil && r.fresh.Load().whole()
}

// checkReads reads f at random offsets and lengths and compares with
// want.
func checkReads(t *testing.T, f vfs.File, want []byte, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 3))
	for range 200 {
		off := r.IntN(len(want))
		n := 1 + r.IntN(min(len(want)-off, 300<<10))
		p := make([]byte, n)
		if m, err := f.ReadAt(p, int64(off)); err != nil || m != n || !bytes.Equal(p, want[off:off+n]) {
			t.Fatalf("ReadAt %d at %d: %d, %v, equal %v", n, off, m, err, bytes.Equal(p[:m], want[off:off+m]))
		}
	}
	// Past the end: io.EOF with the bytes there are, as from the device.
	p := make([]byte, 100)
	if m, err := f.ReadAt(p, int64(len(want)-10)); m != 10 || err == nil || !bytes.Equal(p[:10], want[len(want)-10:]) {
		t.Fatalf("ReadAt over the end: %d, %v", m, err)
	}
}

// TestFreshServesWritten: an sstable pebblefs wrote is read from memory
// once its writer closed it, byte for byte; not before (a reader of the
// live file reads what the writer synced), and not a WAL.
func TestFreshServesWritten(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := newFS(nil)
	name := filepath.Join(dir, "000001.sst")
	data := pattern(1, 1<<20+12345)
	w := writeAll(t, fsys, name, data[:600<<10], 4096, 1, 70000)
	if fsys.fresh.lookup(w.(*writeFile).id, 600<<10, time.Time{}) != nil {
		t.Fatal("a file still being written is served from memory")
	}
	live, fresh := openRead(t, fsys, name)
	if fresh {
		t.Fatal("a reader of the live file got fresh memory")
	}
	checkReads(t, live, data[:600<<10], 1)
	if _, err := w.Write(data[600<<10:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	live.Close()
	f, fresh := openRead(t, fsys, name)
	if !fresh {
		t.Fatal("a closed sstable is not served from memory")
	}
	checkReads(t, f, data, 2)
	f.Close()
	if got := fsys.fresh.inUse(); got < int64(len(data)) || got > int64(len(data))+freshChunk {
		t.Fatalf("fresh files hold %d bytes for a %d-byte file", got, len(data))
	}

	wal := filepath.Join(dir, "000002.log")
	writeAll(t, fsys, wal, data[:1000], 100).Close()
	if _, fresh := openRead(t, fsys, wal); fresh {
		t.Fatal("a WAL is kept in memory")
	}
}

// TestFreshGoneWithFile: removing, renaming or replacing a file drops
// its fresh bytes, so a new file under the name (often the same inode)
// reads as written, never the old bytes.
func TestFreshGoneWithFile(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := newFS(nil)
	a, b := filepath.Join(dir, "000001.sst"), filepath.Join(dir, "000002.sst")
	old, next := pattern(1, 300<<10), pattern(2, 300<<10)

	writeAll(t, fsys, a, old, 4096).Close()
	if err := fsys.Remove(a); err != nil {
		t.Fatal(err)
	}
	if got := fsys.fresh.inUse(); got != 0 {
		t.Fatalf("a removed file left %d fresh bytes", got)
	}
	writeAll(t, fsys, a, next, 4096).Close()
	f, _ := openRead(t, fsys, a)
	checkReads(t, f, next, 1)
	f.Close()

	// Create over an existing name (a new inode) and ReuseForWrite.
	writeAll(t, fsys, a, old, 4096).Close()
	f, _ = openRead(t, fsys, a)
	checkReads(t, f, old, 2)
	f.Close()

	// Rename drops both names' bytes; reads come from the device.
	writeAll(t, fsys, b, next, 4096).Close()
	if err := fsys.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if got := fsys.fresh.inUse(); got != 0 {
		t.Fatalf("renamed files left %d fresh bytes", got)
	}
	f, fresh := openRead(t, fsys, b)
	if fresh {
		t.Fatal("a renamed file is still served from memory")
	}
	checkReads(t, f, old, 3) // read from the device, filling memory as it goes
	f.Close()

	// A link keeps the bytes on Remove of the other name; RemoveAll of
	// the directory drops them.
	writeAll(t, fsys, a, next, 4096).Close()
	if err := fsys.Link(a, filepath.Join(dir, "link.sst")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(a); err != nil {
		t.Fatal(err)
	}
	f, fresh = openRead(t, fsys, filepath.Join(dir, "link.sst"))
	if !fresh {
		t.Fatal("the bytes of a file still linked were dropped")
	}
	checkReads(t, f, next, 4)
	f.Close()
	if err := fsys.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if got := fsys.fresh.inUse(); got != 0 {
		t.Fatalf("RemoveAll left %d fresh bytes", got)
	}
}

// TestFreshChangedOnDisk: a file changed behind pebblefs's back (its
// size or modification time differ) is read from the device.
func TestFreshChangedOnDisk(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := newFS(nil)
	name := filepath.Join(dir, "000001.sst")
	writeAll(t, fsys, name, pattern(1, 100<<10), 4096).Close()
	rewriteBehind(t, fsys, name, pattern(2, 100<<10), 1)
}

// rewriteBehind rewrites the file name with data behind fsys's back (a
// new modification time), and checks that a reader opened after is
// not served from memory and reads data.
func rewriteBehind(t *testing.T, fsys *FS, name string, data []byte, seed uint64) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(name, later, later); err != nil {
		t.Fatal(err)
	}
	f, fresh := openRead(t, fsys, name)
	if fresh {
		t.Fatal("a file rewritten on disk is served from memory")
	}
	checkReads(t, f, data, seed)
	f.Close()
}

// TestFreshBudget: the fresh files never hold more than their budget;
// the least recently read go first, a file over half the budget is not
// kept, and every read is right whichever way it is served, while
// readers race eviction (run under -race).
func TestFreshBudget(t *testing.T) {
	dir := testenv.Dir(t)
	const budget = 8 * freshChunk
	fsys := newFS(&Options{FreshFiles: budget})
	data := map[string][]byte{}
	name := func(i int) string { return filepath.Join(dir, "0000"+string(rune('a'+i))+".sst") }
	for i := range 3 {
		data[name(i)] = pattern(uint64(i), 3*freshChunk-100)
		writeAll(t, fsys, name(i), data[name(i)], 8192).Close()
		if got := fsys.fresh.inUse(); got > budget {
			t.Fatalf("fresh files hold %d bytes, budget %d", got, budget)
		}
	}
	if _, fresh := openRead(t, fsys, name(0)); fresh {
		t.Fatal("the oldest file was not evicted")
	}
	big := name(9)
	data[big] = pattern(9, budget/2+1)
	writeAll(t, fsys, big, data[big], 8192).Close()
	if _, fresh := openRead(t, fsys, big); fresh {
		t.Fatal("a file over half the budget was kept")
	}

	var files []vfs.File
	var wants [][]byte
	for n, d := range data {
		f, err := fsys.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		files, wants = append(files, f), append(wants, d)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		until(&wg, stop, func(i int) bool {
			k := (g + i) % len(files)
			checkReads(t, files[k], wants[k], uint64(g*1000+i))
			return true
		})
	}
	for i := range 10 { // new files evict the ones being read
		n := filepath.Join(dir, "1000"+string(rune('a'+i))+".sst")
		writeAll(t, fsys, n, pattern(uint64(100+i), 2*freshChunk), 8192).Close()
		if got := fsys.fresh.inUse(); got > budget {
			t.Errorf("fresh files hold %d bytes, budget %d", got, budget)
		}
	}
	close(stop)
	wg.Wait()
	for _, f := range files {
		f.Close()
	}
}

// writeCategory writes data to a new file created with category, and
// closes it.
func writeCategory(t *testing.T, fsys *FS, name string, data []byte, category vfs.DiskWriteCategory) {
	t.Helper()
	f, err := fsys.Create(name, category)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFreshKeepsFlushes: when the budget is full, a compaction's output
// evicts other compactions' outputs, never a flush's L0 sstable, even
// one used less recently; it is not kept when only flushes' files are
// there; a flush's output evicts compactions' outputs first, then the
// least recently used flush output.
func TestFreshKeepsFlushes(t *testing.T) {
	dir := testenv.Dir(t)
	const budget = 8 * freshChunk
	fsys := newFS(&Options{FreshFiles: budget})
	name := func(s string) string { return filepath.Join(dir, s+".sst") }
	size := 3*freshChunk - 100
	fresh := func(n string) bool {
		t.Helper()
		f, fresh := openRead(t, fsys, name(n))
		f.Close()
		return fresh
	}

	writeCategory(t, fsys, name("f1"), pattern(1, size), flushCategory)
	writeCategory(t, fsys, name("c1"), pattern(2, size), "pebble-compaction")
	writeCategory(t, fsys, name("c2"), pattern(3, size), "pebble-compaction")
	if !fresh("f1") || fresh("c1") || !fresh("c2") {
		t.Fatalf("after f1, c1, c2: want f1 and c2 kept, c1 evicted; got f1 %v c1 %v c2 %v", fresh("f1"), fresh("c1"), fresh("c2"))
	}
	writeCategory(t, fsys, name("f2"), pattern(4, size), flushCategory)
	if !fresh("f1") || fresh("c2") || !fresh("f2") {
		t.Fatalf("after f2: want f1 and f2 kept, c2 evicted; got f1 %v c2 %v f2 %v", fresh("f1"), fresh("c2"), fresh("f2"))
	}
	writeCategory(t, fsys, name("c3"), pattern(5, size), vfs.WriteCategoryUnspecified)
	if !fresh("f1") || !fresh("f2") || fresh("c3") {
		t.Fatalf("after c3: want f1 and f2 kept, c3 not; got f1 %v f2 %v c3 %v", fresh("f1"), fresh("f2"), fresh("c3"))
	}
	fresh("f1") // f2 is now the flush output used least recently
	writeCategory(t, fsys, name("f3"), pattern(6, size), flushCategory)
	if !fresh("f1") || fresh("f2") || !fresh("f3") {
		t.Fatalf("after f3: want f1 and f3 kept, f2 evicted; got f1 %v f2 %v f3 %v", fresh("f1"), fresh("f2"), fresh("f3"))
	}
	if got := fsys.fresh.inUse(); got > budget {
		t.Fatalf("fresh files hold %d bytes, budget %d", got, budget)
	}
	for _, n := range []string{"f1", "f3"} {
		f, _ := openRead(t, fsys, name(n))
		checkReads(t, f, pattern(map[string]uint64{"f1": 1, "f3": 6}[n], size), 7)
		f.Close()
	}
}

// TestFreshFlushCategory: Pebble creates a memtable flush's sstables
// with flushCategory, which is how pebblefs tells them apart; a Pebble
// that named the category otherwise would leave every file a
// compaction's output.
func TestFreshFlushCategory(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := newFS(&Options{FreshFiles: 64 << 20})
	o := pebbleOptions(fsys)
	o.DisableAutomaticCompactions = true
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 100 {
		if err := db.Set(key(i), value(i, 0), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	fsys.fresh.mu.Lock()
	defer fsys.fresh.mu.Unlock()
	flushes := 0
	for _, ff := range fsys.fresh.files {
		if ff.flush {
			flushes++
		}
	}
	if flushes != 1 {
		t.Fatalf("%d fresh files written by a flush, want 1 (of %d)", flushes, len(fsys.fresh.files))
	}
}

// TestFreshFill: a file pebblefs did not write (here, written with
// os.WriteFile) is filled into memory as point reads miss, chunk by
// chunk, and read right throughout; once whole, its reads leave the
// device alone and a sequential reader gets it too; a rewrite on disk
// is never served from the old chunks; nothing is filled once the store
// outgrows the budget.
func TestFreshFill(t *testing.T) {
	dir := testenv.Dir(t)
	const budget = 16 * freshChunk
	fsys := newFS(&Options{FreshFiles: budget})
	name := filepath.Join(dir, "000001.sst")
	data := pattern(1, 3*freshChunk+5000)
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}

	f, _ := openRead(t, fsys, name)
	if f.fresh.Load() == nil || f.fresh.Load().whole() {
		t.Fatal("a point reader of a file not in memory got nothing to fill")
	}
	if seq, err := fsys.Open(name, vfs.SequentialReadsOption); err != nil {
		t.Fatal(err)
	} else if seq.(*readFile).fresh.Load() != nil {
		t.Fatal("a sequential reader got a file not yet whole")
	} else {
		seq.Close()
	}
	checkReads(t, f, data, 1)
	if got := fsys.fresh.inUse(); got == 0 || got > 4*freshChunk {
		t.Fatalf("after reads of a 4-chunk file, fresh files hold %d bytes", got)
	}
	if _, err := f.ReadAt(make([]byte, len(data)), 0); err != nil {
		t.Fatal(err)
	}
	if !f.fresh.Load().whole() {
		t.Fatal("a file read end to end is not whole in memory")
	}
	before := fsys.Stats()
	checkReads(t, f, data, 2)
	if s := fsys.Stats().Sub(before); s.Read.Reads != 0 || s.FreshReads == 0 {
		t.Fatalf("reads of a whole file: %d from the device, %d from memory", s.Read.Reads, s.FreshReads)
	}
	f.Close()
	if _, fresh := openRead(t, fsys, name); !fresh {
		t.Fatal("a file filled whole is not served from memory when opened again")
	}

	// Rewritten behind pebblefs's back: the filled chunks are not served.
	rewriteBehind(t, fsys, name, pattern(2, 2*freshChunk), 3)

	// A store larger than the budget: nothing more is filled.
	for i := range 9 {
		n := filepath.Join(dir, fmt.Sprintf("%06d.sst", 10+i))
		if err := os.WriteFile(n, pattern(uint64(10+i), 4*freshChunk), 0o644); err != nil {
			t.Fatal(err)
		}
		g, _ := openRead(t, fsys, n)
		g.Close()
	}
	held := fsys.fresh.inUse()
	for i := range 9 {
		g, _ := openRead(t, fsys, filepath.Join(dir, fmt.Sprintf("%06d.sst", 10+i)))
		checkReads(t, g, pattern(uint64(10+i), 4*freshChunk), 4)
		g.Close()
	}
	if got := fsys.fresh.inUse(); got != held || fsys.fresh.stored.Load() <= budget {
		t.Fatalf("with %d bytes stored and a budget of %d, reads filled %d bytes more", fsys.fresh.stored.Load(), budget, got-held)
	}

	// RemoveAll of a directory takes its files, and only them, off the
	// store: the store outside it still outgrows the budget.
	sub := filepath.Join(dir, "checkpoint")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	n := filepath.Join(sub, "000100.sst")
	if err := os.WriteFile(n, pattern(100, 2*freshChunk), 0o644); err != nil {
		t.Fatal(err)
	}
	g, _ := openRead(t, fsys, n)
	g.Close()
	stored := fsys.fresh.stored.Load()
	if err := fsys.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	if got := fsys.fresh.stored.Load(); got != stored-2*freshChunk {
		t.Fatalf("RemoveAll of a directory with a 2-chunk file: %d bytes stored, want %d", got, stored-2*freshChunk)
	}
}

// TestFreshFillBadSector: a chunk that cannot be read whole (a latent
// sector error beside the block asked for) is not filled, the block is
// read from the device as without fresh files, and a read of the bad
// sector itself fails.
func TestFreshFillBadSector(t *testing.T) {
	dir := testenv.Dir(t)
	bad := int64(freshChunk + 64<<10)
	fsys := newFS(&Options{FreshFiles: 16 * freshChunk, Faults: faults.NewPlan(faults.BadSectors(bad, 4096))})
	name := filepath.Join(dir, "000001.sst")
	data := pattern(1, 3*freshChunk)
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ := openRead(t, fsys, name)
	defer f.Close()
	p := make([]byte, 4000)
	for _, off := range []int64{100, freshChunk + 10, 2*freshChunk + 7} {
		if _, err := f.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:off+int64(len(p))]) {
			t.Fatalf("ReadAt at %d: %v, or bytes other than written", off, err)
		}
	}
	if got := fsys.fresh.inUse(); got != 2*freshChunk {
		t.Fatalf("fresh files hold %d bytes, want the 2 chunks without a bad sector", got)
	}
	if _, err := f.ReadAt(p, bad); !errors.Is(err, syscall.EIO) {
		t.Fatalf("ReadAt of the bad sector: %v, want EIO", err)
	}
}

// TestFreshRefill: a file pebblefs wrote and then evicted for newer ones
// fills again, once the store fits the budget again, as a reader that
// held it open all along misses: Pebble's file cache keeps an sstable's
// handle open for as long as it lives.
func TestFreshRefill(t *testing.T) {
	dir := testenv.Dir(t)
	const budget = 8 * freshChunk
	fsys := newFS(&Options{FreshFiles: budget})
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("%06d.sst", i)) }
	data := pattern(1, 3*freshChunk-100)
	writeAll(t, fsys, name(1), data, 8192).Close()
	f, fresh := openRead(t, fsys, name(1))
	defer f.Close()
	if !fresh {
		t.Fatal("a file just written is not in memory")
	}
	for i := 2; i <= 3; i++ {
		writeAll(t, fsys, name(i), pattern(uint64(i), 3*freshChunk-100), 8192).Close()
	}
	if f.fresh.Load().whole() {
		t.Fatal("the oldest file was not evicted")
	}
	// As a compaction removes its inputs once its outputs are written,
	// the store shrinks back within the budget.
	if err := fsys.Remove(name(2)); err != nil {
		t.Fatal(err)
	}
	checkReads(t, f, data, 1)
	if _, err := f.ReadAt(make([]byte, len(data)), 0); err != nil {
		t.Fatal(err)
	}
	if !f.fresh.Load().whole() {
		t.Fatal("an evicted file read end to end is not in memory again")
	}
	if got := fsys.fresh.inUse(); got > budget {
		t.Fatalf("fresh files hold %d bytes, budget %d", got, budget)
	}
}

// TestFreshDropBeyondBudget: once the store outgrows the budget, files
// evicted for newer ones leave the fresh files altogether (they could
// not fill again), so eviction's scan stays as short as the budget.
func TestFreshDropBeyondBudget(t *testing.T) {
	dir := testenv.Dir(t)
	const budget = 4 * freshChunk
	fsys := newFS(&Options{FreshFiles: budget})
	for i := range 12 {
		name := filepath.Join(dir, fmt.Sprintf("%06d.sst", i))
		writeAll(t, fsys, name, pattern(uint64(i), freshChunk), 4096).Close()
	}
	fsys.fresh.mu.Lock()
	n := len(fsys.fresh.files)
	fsys.fresh.mu.Unlock()
	// The budget's four, and the one evicted while the store still fit,
	// kept to fill again.
	if n > budget/freshChunk+1 {
		t.Fatalf("a 12-chunk store with a 4-chunk budget keeps %d fresh files", n)
	}
	if got := fsys.fresh.stored.Load(); got != 12*freshChunk {
		t.Fatalf("the store is %d bytes, want %d", got, 12*freshChunk)
	}
}

// dropOne writes sstables 1 to 4 of 3 chunks each in dir on fsys, whose
// budget is 8 chunks, with a point reader of 2 opened once it is written:
// 3 evicts 1 (the store still fits: 1 is kept to fill again), 4 drops 2
// (the store, 12 chunks, is past the budget). It returns the reader,
// 2's bytes and the sstables' names.
func dropOne(t *testing.T, fsys *FS, dir string) (*readFile, []byte, func(int) string) {
	t.Helper()
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("%06d.sst", i)) }
	data := pattern(2, 3*freshChunk-100)
	writeAll(t, fsys, name(1), pattern(1, 3*freshChunk-100), 8192).Close()
	writeAll(t, fsys, name(2), data, 8192).Close()
	f, fresh := openRead(t, fsys, name(2))
	t.Cleanup(func() { f.Close() })
	if !fresh {
		t.Fatal("a file just written is not in memory")
	}
	for i := 3; i <= 4; i++ {
		writeAll(t, fsys, name(i), pattern(uint64(i), 3*freshChunk-100), 8192).Close()
	}
	if !f.fresh.Load().gone() {
		t.Fatal("a file was not dropped with the store past the budget")
	}
	return f, data, name
}

// TestFreshReattach: a point reader whose file was dropped while the
// store outgrew the budget, or that opened it then, reads it from
// memory again once the store fits (a compaction removed its inputs);
// a sequential reader does not.
func TestFreshReattach(t *testing.T) {
	const budget = 8 * freshChunk
	fsys := newFS(&Options{FreshFiles: budget})
	early, data, name := dropOne(t, fsys, testenv.Dir(t))
	late, _ := openRead(t, fsys, name(2))
	defer late.Close()
	seq, err := fsys.Open(name(2), vfs.SequentialReadsOption)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	if late.fresh.Load() != nil || seq.(*readFile).fresh.Load() != nil {
		t.Fatal("a file opened with the store past the budget got fresh bytes")
	}
	checkReads(t, early, data, 1) // from the device: the store does not fit
	if !early.fresh.Load().gone() {
		t.Fatal("a reader attached again while the store was past the budget")
	}

	for _, i := range []int{1, 3} { // as a compaction removes its inputs
		if err := fsys.Remove(name(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []*readFile{early, late} {
		if _, err := f.ReadAt(make([]byte, len(data)), 0); err != nil {
			t.Fatal(err)
		}
		if ff := f.fresh.Load(); ff == nil || !ff.whole() {
			t.Fatal("a point reader of a dropped file did not fill it again once the store fit")
		}
		checkReads(t, f, data, 2)
	}
	if early.fresh.Load() != late.fresh.Load() {
		t.Fatal("two readers of one file attached to two copies of it")
	}
	checkReads(t, seq, data, 3)
	if seq.(*readFile).fresh.Load() != nil {
		t.Fatal("a sequential reader attached")
	}
	if got := fsys.fresh.inUse(); got > budget {
		t.Fatalf("fresh files hold %d bytes, budget %d", got, budget)
	}
}

// TestFreshNoReattachRemoved: a reader still open on a file pebblefs
// removed reads it from the device once the store fits again: no
// memory outlives the file, and the store does not count it.
func TestFreshNoReattachRemoved(t *testing.T) {
	const budget = 8 * freshChunk
	fsys := newFS(&Options{FreshFiles: budget})
	f, data, name := dropOne(t, fsys, testenv.Dir(t))
	for _, i := range []int{2, 3} {
		if err := fsys.Remove(name(i)); err != nil {
			t.Fatal(err)
		}
	}
	if !fsys.fresh.fills() {
		t.Fatal("the store does not fit after the removals")
	}
	checkReads(t, f, data, 1)
	if _, err := f.ReadAt(make([]byte, len(data)), 0); err != nil {
		t.Fatal(err)
	}
	if ff := f.fresh.Load(); ff != nil && !ff.gone() {
		t.Fatal("a reader of a removed file attached again")
	}
	fsys.fresh.mu.Lock()
	_, held := fsys.fresh.files[f.fresh.Load().id]
	fsys.fresh.mu.Unlock()
	if held {
		t.Fatal("the fresh files hold a removed file")
	}
	if got, want := fsys.fresh.stored.Load(), int64(2*(3*freshChunk-100)); got != want {
		t.Fatalf("the store counts %d bytes, want %d (files 1 and 4)", got, want)
	}
}

// TestFreshFillsJustPast: reads fill while the store fits the limit or
// passes it by a fillSlack-th, not beyond.
func TestFreshFillsJustPast(t *testing.T) {
	const budget = 64 * freshChunk
	c := newFreshFiles(budget)
	for _, tc := range []struct {
		stored int64
		fills  bool
	}{
		{budget, true},
		{budget + budget/fillSlack, true},
		{budget + budget/fillSlack + 1, false},
		{2 * budget, false},
	} {
		c.note(fileID{ino: 1}, "000001.sst", tc.stored)
		if got := c.fills(); got != tc.fills {
			t.Errorf("a %d-byte store with a %d-byte limit: fills %v, want %v", tc.stored, budget, got, tc.fills)
		}
	}
	c.setLimit(budget / 2)
	c.note(fileID{ino: 1}, "000001.sst", budget/2+budget/2/fillSlack+1)
	if c.fills() {
		t.Error("a store past the lowered limit by more than its slack fills")
	}
}
