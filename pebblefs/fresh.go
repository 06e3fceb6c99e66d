//go:build unix

package pebblefs

import (
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dio-storage/dio/aligned"
)

// freshChunk is the piece of aligned memory a fresh file grows by: a
// flush's 2 MiB sstable takes eight, and a file's last piece wastes at
// most this much.
const freshChunk = 256 << 10

// freshFiles keeps what Pebble writes to its sstables and blob files in
// aligned memory, under a byte budget, so that reads of a file written
// recently (a compaction's inputs, which flushes and compactions wrote
// seconds before; a store that fits the budget) are served without the
// device. A file is served only once its writer has closed it, and only
// to a reader that finds the same inode, size and modification time on
// disk; it is dropped when pebblefs removes or renames it, and the least
// recently read complete files are dropped when the budget is needed:
// compactions' outputs before memtable flushes' (see grow).
//
// While the sstables and blob files pebblefs knows of fit the budget
// (the limit, see giveWay; or pass it by a little, see fills), a file
// opened for point reads that is not in memory (written before the
// store was opened, or evicted) is filled from the disk a chunk at a
// time as it is read (see fill), so a store that fits is served from
// memory whatever wrote it, as a page cache would serve it. Beyond the
// budget, a chunk read for one block pushes out chunks read more often:
// filling while the store was up to twice the budget (a 260 MB store,
// 192 MiB), YCSB C read 257 KB from the device per miss and ran at two
// thirds of its pace without filling.
type freshFiles struct {
	budget int64 // Options.FreshFiles
	// limit is what the files may hold now: the budget, less what the
	// memory cgroup's pressure took back (see giveWay). gaveWay counts
	// the bytes unmapped for it.
	limit   atomic.Int64
	gaveWay atomic.Int64
	woken   atomic.Int64 // times the kernel's threshold signal woke the watcher
	armed   atomic.Bool  // the watcher registered for that signal
	clock   atomic.Int64 // orders uses, for eviction

	mu    sync.Mutex
	used  int64 // bytes in chunks, of every file in files
	files map[fileID]*freshFile
	// known holds the name and size of every kept file pebblefs wrote
	// or opened and has not removed; stored is the sum of their sizes
	// (written under mu), what fill weighs against the limit.
	known  map[fileID]keptFile
	stored atomic.Int64
	// spare holds the chunks of dropped files for the next ones: mapping
	// a chunk afresh and faulting its pages in cost a third of a 1M-record
	// load's CPU (mmap, munmap and the page faults of the copy into it).
	// used plus spare's bytes never exceed limit, but after giveWay
	// lowers it, until the chunks of files still being written or
	// filled come back.
	spare []*aligned.Buffer
}

// freshFile is one file's bytes in memory.
type freshFile struct {
	id    fileID
	name  string
	flush bool         // a memtable flush wrote it (an L0 sstable)
	last  atomic.Int64 // the clock at its last use

	// mu guards what follows: a reader copies under RLock, eviction and
	// removal free the chunks under Lock.
	mu sync.RWMutex
	// filled: read from the disk as readers miss (see fill), since it
	// was not written here or was evicted; its chunks are the file's
	// chunk by chunk, nil where not read.
	filled   bool
	chunks   []*aligned.Buffer
	loaded   int   // chunks not nil
	size     int64 // bytes written, or the size on disk when filled
	complete bool  // the writer closed it: size and mtime are final
	mtime    time.Time
	dropped  bool // its chunks are freed; serve nothing
}

func newFreshFiles(budget int64) *freshFiles {
	if budget < freshChunk {
		return nil
	}
	c := &freshFiles{budget: budget, files: map[fileID]*freshFile{}, known: map[fileID]keptFile{}}
	c.limit.Store(budget)
	return c
}

// keeps reports whether a file of this name is kept: sstables and blob
// files, which Pebble reads back; not the WAL, MANIFEST or OPTIONS, read
// only when a store opens.
func keeps(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// start begins keeping the file id that name was just created as, by a
// memtable flush when flush; nil if it is not kept.
func (c *freshFiles) start(id fileID, name string, flush bool) *freshFile {
	if c == nil || id == (fileID{}) || !keeps(name) {
		return nil
	}
	ff := &freshFile{id: id, name: name, flush: flush}
	ff.last.Store(c.clock.Add(1))
	c.mu.Lock()
	old := c.files[id]
	c.files[id] = ff
	c.mu.Unlock()
	if old != nil { // an inode reused behind pebblefs's back
		c.free(old)
	}
	return ff
}

// write appends p to ff, taking chunks from the budget; it gives up on
// ff (dropping it) when the budget cannot hold it.
func (c *freshFiles) write(ff *freshFile, p []byte) {
	for len(p) > 0 {
		ff.mu.Lock()
		if ff.dropped {
			ff.mu.Unlock()
			return
		}
		room := int64(len(ff.chunks))*freshChunk - ff.size
		if room == 0 {
			ff.mu.Unlock()
			b := c.grow(ff)
			if b == nil {
				c.drop(ff)
				return
			}
			ff.mu.Lock()
			if ff.dropped {
				ff.mu.Unlock()
				c.release(b)
				return
			}
			ff.chunks = append(ff.chunks, b)
			ff.loaded++
			room = freshChunk
		}
		last := ff.chunks[len(ff.chunks)-1].Bytes()
		n := copy(last[freshChunk-int(room):], p)
		ff.size += int64(n)
		ff.mu.Unlock()
		p = p[n:]
	}
}

// grow returns a new chunk for ff, evicting the least recently used
// complete files to make room, or nil when ff would take more than half
// the limit or nothing can be evicted.
//
// Compactions' outputs go first, flushes' L0 sstables only to make room
// for another flush's: an L0 sstable stays in L0 until a compaction
// reads it whole, soon, and is removed then, while a compaction's
// output may wait long for the next one (a deeper level's). With the
// budget a small share of an 8x store, a compaction's outputs (several
// files, each up to half the budget) otherwise pushed out the L0 files
// the next compaction read from the device.
func (c *freshFiles) grow(ff *freshFile) *aligned.Buffer {
	ff.mu.RLock()
	mine := int64(ff.loaded) * freshChunk
	ff.mu.RUnlock()
	if mine+freshChunk > c.limit.Load()/2 {
		return nil
	}
	for {
		c.mu.Lock()
		if c.used+freshChunk <= c.limit.Load() {
			c.used += freshChunk
			var b *aligned.Buffer
			if n := len(c.spare); n > 0 {
				b = c.spare[n-1]
				c.spare[n-1] = nil
				c.spare = c.spare[:n-1]
			}
			c.mu.Unlock()
			if b != nil {
				return b
			}
			b, err := aligned.New(freshChunk, 4096)
			if err != nil {
				c.mu.Lock()
				c.used -= freshChunk
				c.mu.Unlock()
				return nil
			}
			return b
		}
		c.freeSpare() // over a lowered limit: make room from files
		victim := c.oldestComplete(ff.flush)
		c.mu.Unlock()
		switch {
		case victim == nil:
			return nil
		case c.fills():
			c.evict(victim)
		default: // it could not fill again: keep files, which eviction scans, short
			c.drop(victim)
		}
	}
}

// evict frees ff's chunks to make room for others. ff stays in files,
// to be filled again as its readers miss, while reads fill (see fills).
func (c *freshFiles) evict(ff *freshFile) {
	ff.mu.Lock()
	if ff.dropped {
		ff.mu.Unlock()
		return
	}
	chunks := ff.chunks
	ff.chunks, ff.loaded, ff.filled = make([]*aligned.Buffer, len(chunks)), 0, true
	ff.mu.Unlock()
	c.releaseAll(chunks)
}

// oldestComplete returns the complete file to evict: the compaction
// output used least recently, else, when flush, the flush output used
// least recently. c.mu is held.
func (c *freshFiles) oldestComplete(flush bool) *freshFile {
	var v *freshFile
	for _, ff := range c.files {
		if !ff.evictable() || ff.flush && !flush {
			continue
		}
		switch {
		case v == nil, v.flush && !ff.flush:
			v = ff
		case v.flush == ff.flush && ff.last.Load() < v.last.Load():
			v = ff
		}
	}
	return v
}

// evictable reports whether ff is complete and holds memory.
func (ff *freshFile) evictable() bool {
	ff.mu.RLock()
	defer ff.mu.RUnlock()
	return ff.complete && !ff.dropped && ff.loaded > 0
}

// finish marks ff complete: its writer closed the file, which is size
// bytes long with modification time mtime.
func (c *freshFiles) finish(ff *freshFile, size int64, mtime time.Time) {
	ff.mu.Lock()
	ok := !ff.dropped && ff.size == size
	if ok {
		ff.complete, ff.mtime = true, mtime
	}
	ff.mu.Unlock()
	c.note(ff.id, ff.name, size)
	if !ok {
		c.drop(ff)
	}
}

// note records that the kept file id is size bytes long on disk.
func (c *freshFiles) note(id fileID, name string, size int64) {
	c.mu.Lock()
	c.stored.Add(size - c.known[id].size)
	c.known[id] = keptFile{name, size}
	c.mu.Unlock()
}

// lookup returns the complete fresh file with id whose size and mtime
// are what the disk says, or nil.
func (c *freshFiles) lookup(id fileID, size int64, mtime time.Time) *freshFile {
	if c == nil || id == (fileID{}) {
		return nil
	}
	c.mu.Lock()
	ff := c.files[id]
	c.mu.Unlock()
	if ff == nil {
		return nil
	}
	if !ff.is(size, mtime) {
		return nil
	}
	ff.last.Store(c.clock.Add(1))
	return ff
}

// readAt copies len(p) bytes at off into p from memory; false when ff
// was dropped (the caller reads the device) or the range is not all
// there (past the end: the caller's Reader says io.EOF).
func (c *freshFiles) readAt(ff *freshFile, p []byte, off int64) bool {
	ff.mu.RLock()
	defer ff.mu.RUnlock()
	if ff.dropped || off < 0 || off+int64(len(p)) > ff.size {
		return false
	}
	if len(p) > 0 && ff.loaded < len(ff.chunks) && !ff.holds(off, len(p)) {
		return false
	}
	for n := 0; n < len(p); {
		pos := off + int64(n)
		chunk := ff.chunks[pos/freshChunk].Bytes()
		n += copy(p[n:], chunk[pos%freshChunk:])
	}
	ff.last.Store(c.clock.Add(1))
	return true
}

// drop forgets ff and frees its memory.
func (c *freshFiles) drop(ff *freshFile) {
	if c == nil || ff == nil {
		return
	}
	c.mu.Lock()
	if c.files[ff.id] == ff {
		delete(c.files, ff.id)
	}
	c.mu.Unlock()
	c.free(ff)
}

// free frees ff's chunks once no reader is copying from them.
func (c *freshFiles) free(ff *freshFile) {
	ff.mu.Lock()
	chunks := ff.chunks
	ff.chunks, ff.loaded, ff.dropped = nil, 0, true
	ff.mu.Unlock()
	c.releaseAll(chunks)
}

// releaseAll releases the chunks that are not nil.
func (c *freshFiles) releaseAll(chunks []*aligned.Buffer) {
	for _, b := range chunks {
		if b != nil {
			c.release(b)
		}
	}
}

// release gives b back to the budget, kept mapped as a spare for the
// next chunk, or unmapped when the limit has no room for it.
func (c *freshFiles) release(b *aligned.Buffer) {
	c.mu.Lock()
	c.used -= freshChunk
	c.spare = append(c.spare, b)
	c.freeSpare()
	c.mu.Unlock()
}

// freeSpare unmaps the spare chunks over the limit. c.mu is held.
func (c *freshFiles) freeSpare() {
	for n := len(c.spare); n > 0 && c.used+int64(n)*freshChunk > c.limit.Load(); n-- {
		c.spare[n-1].Free()
		c.spare[n-1] = nil
		c.spare = c.spare[:n-1]
		c.gaveWay.Add(freshChunk)
	}
}

// memory returns held's bytes, the limit and the bytes given way, at
// one moment.
func (c *freshFiles) memory() (held, limit, gaveWay, woken int64) {
	if c == nil {
		return 0, 0, 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used + int64(len(c.spare))*freshChunk, c.limit.Load(), c.gaveWay.Load(), c.woken.Load()
}

// held returns the bytes mapped: the files' chunks and the spares.
func (c *freshFiles) held() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used + int64(len(c.spare))*freshChunk
}

// forget drops the file id (removed, renamed, or replaced).
func (c *freshFiles) forget(id fileID) {
	if c == nil || id == (fileID{}) {
		return
	}
	c.mu.Lock()
	ff := c.files[id]
	c.stored.Add(-c.known[id].size)
	delete(c.known, id)
	c.mu.Unlock()
	c.drop(ff)
}

// forgetUnder drops every file named under dir (RemoveAll).
func (c *freshFiles) forgetUnder(dir string) {
	if c == nil {
		return
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var gone []*freshFile
	c.mu.Lock()
	for id, k := range c.known {
		if under(k.name, dir, prefix) {
			c.stored.Add(-k.size)
			delete(c.known, id)
		}
	}
	for _, ff := range c.files {
		if under(ff.name, dir, prefix) {
			gone = append(gone, ff)
		}
	}
	c.mu.Unlock()
	for _, ff := range gone {
		c.drop(ff)
	}
}

// under reports whether name is dir or names a file under it (prefix:
// dir with one trailing slash).
func under(name, dir, prefix string) bool {
	return name == dir || strings.HasPrefix(name, prefix)
}

// keptFile is what freshFiles knows of a kept file on disk.
type keptFile struct {
	name string
	size int64
}

// inUse returns the bytes the fresh files hold.
func (c *freshFiles) inUse() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// attach returns what a reader of the kept file id at name, size bytes
// long with modification time mtime, reads from memory: its fresh file,
// else for point reads (not seq) while the store fits the limit a new
// filled one, else nil. A seq reader (a compaction's input,
// read once from start to end) gets a filled file only once it is whole:
// it reads ahead from the disk faster than chunks fill, and filling
// would keep a file about to be removed.
func (c *freshFiles) attach(id fileID, name string, size int64, mtime time.Time, seq bool) *freshFile {
	if c == nil || id == (fileID{}) || !keeps(name) {
		return nil
	}
	c.note(id, name, size)
	return c.attachKnown(id, name, size, mtime, seq)
}

// reattach is attach for a point reader whose file has no fresh bytes,
// or lost them: nil once pebblefs has removed or renamed the file, so
// that no memory outlives it (a file with other links stays known, as
// it does for attach).
func (c *freshFiles) reattach(id fileID, name string, size int64, mtime time.Time) *freshFile {
	return c.attachKnown(id, name, size, mtime, false)
}

// attachKnown is attach once pebblefs knows the file: a file it no
// longer knows at name (removed or renamed), checked under the lock
// that inserts, gets nothing.
func (c *freshFiles) attachKnown(id fileID, name string, size int64, mtime time.Time, seq bool) *freshFile {
	if ff := c.lookup(id, size, mtime); ff != nil {
		if !seq || ff.whole() {
			return ff
		}
		return nil
	}
	if seq || size == 0 || !c.fills() {
		return nil
	}
	ff := &freshFile{id: id, name: name, filled: true, complete: true, size: size, mtime: mtime,
		chunks: make([]*aligned.Buffer, (size+freshChunk-1)/freshChunk)}
	ff.last.Store(c.clock.Add(1))
	c.mu.Lock()
	if k, ok := c.known[id]; !ok || k.name != name { // removed or renamed meanwhile
		c.mu.Unlock()
		return nil
	}
	old := c.files[id]
	if old != nil && old.writing() {
		c.mu.Unlock()
		return nil
	}
	if old != nil && old.is(size, mtime) { // another reader attached first
		c.mu.Unlock()
		return old
	}
	c.files[id] = ff
	c.mu.Unlock()
	if old != nil { // stale: the file changed behind pebblefs's back
		c.free(old)
	}
	return ff
}

// fillSlack is how far past the limit the store may grow and still be
// filled: a limit/fillSlack more. A store that fits only just, as a
// write-heavy workload grows it and compactions rewrite it, passes the
// limit again and again; not filling then left every file dropped
// meanwhile on the device for good (in pebble-bench's data-fits split,
// a 240-280 MB store in 256 MiB, 1.4 misses per YCSB E scan went to the
// device that way). Filling a sixteenth past it, a chunk filled pushes
// out one read least recently, seldom wanted again: 3 rounds ran A, B,
// C and E 1.05-1.10x as fast, each faster in every round, at 0.88-0.96x
// the CPU. An eighth past it thrashed (C read 6 KB per op from the
// device, not 0.2, and ran at 0.70x).
const fillSlack = 16

// fills reports whether reads fill files into memory: while the store
// fits the limit, or passes it by less than a fillSlack-th.
func (c *freshFiles) fills() bool {
	limit := c.limit.Load()
	return c.stored.Load() <= limit+limit/fillSlack
}

// whole reports whether all of ff is in memory.
func (ff *freshFile) whole() bool {
	ff.mu.RLock()
	defer ff.mu.RUnlock()
	return !ff.dropped && ff.loaded == len(ff.chunks)
}

// is reports whether ff is complete, not dropped, and the file on disk
// that is size bytes long with modification time mtime.
func (ff *freshFile) is(size int64, mtime time.Time) bool {
	ff.mu.RLock()
	defer ff.mu.RUnlock()
	return ff.complete && !ff.dropped && ff.size == size && ff.mtime.Equal(mtime)
}

// gone reports whether ff's bytes were dropped: it serves nothing more.
func (ff *freshFile) gone() bool {
	ff.mu.RLock()
	defer ff.mu.RUnlock()
	return ff.dropped
}

// writing reports whether ff is a writer's, still open.
func (ff *freshFile) writing() bool {
	ff.mu.RLock()
	defer ff.mu.RUnlock()
	return !ff.complete && !ff.dropped
}

// holds reports whether the chunks under len bytes at off are all in
// memory. ff.mu is held.
func (ff *freshFile) holds(off int64, n int) bool {
	for i := off / freshChunk; i <= (off+int64(n)-1)/freshChunk; i++ {
		if ff.chunks[i] == nil {
			return false
		}
	}
	return true
}

// fill reads the chunks of the filled file ff under len(p) bytes at off
// from r (the file on disk) into memory and copies the bytes into p;
// false when ff is not filled, was dropped or cannot grow (the caller
// reads the device).
func (c *freshFiles) fill(ff *freshFile, r fileReader, p []byte, off int64) bool {
	ff.mu.RLock()
	filled, size := ff.filled, ff.size // a filled file's size is final
	ff.mu.RUnlock()
	if !filled || !c.fills() || len(p) == 0 || off < 0 || off+int64(len(p)) > size {
		return false
	}
	for i := off / freshChunk; i <= (off+int64(len(p))-1)/freshChunk; i++ {
		ff.mu.RLock()
		have := ff.dropped || ff.chunks[i] != nil
		ff.mu.RUnlock()
		if have {
			continue
		}
		b := c.grow(ff)
		if b == nil {
			return false
		}
		at := i * freshChunk
		want := min(freshChunk, size-at)
		// A whole number of 4 KiB blocks, for one read straight into b.
		if n, err := r.ReadAtBuffer(b, int(min(aligned.Up(want, 4096), freshChunk)), at); int64(n) < want || err != nil && err != io.EOF {
			c.release(b)
			return false
		}
		ff.mu.Lock()
		if ff.dropped || ff.chunks[i] != nil { // dropped, or filled by another reader meanwhile
			ff.mu.Unlock()
			c.release(b)
			continue
		}
		ff.chunks[i] = b
		ff.loaded++
		ff.mu.Unlock()
	}
	return c.readAt(ff, p, off)
}
