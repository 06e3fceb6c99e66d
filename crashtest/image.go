//go:build linux

package crashtest

import (
	"maps"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// pageSize is the unit an image keeps its bytes in: the page cache's, which
// is also the largest sector size the harness makes (xfs's 4 KiB).
const pageSize = 4096

// A page is pageSize bytes of an image. Pages are never changed once a map
// other than their owner's may hold them: writes copy (see image.write).
type page = [pageSize]byte

// pages maps a page index to its bytes; a missing page reads as the layer
// below it, and below the last, as zeros.
type pages map[int64]*page

// An image is a disk held in memory in three layers: base (the filesystem
// as mkfs made it), mid (the writes a crash state kept) and top (what was
// written since the image was served: journal recovery, the checker).
// base and mid are shared with other images and never written; top's
// pages are the image's own.
type image struct {
	size int64
	base pages
	mid  pages

	mu  sync.RWMutex
	top pages
	// shared says top's pages may also be another image's (fork):
	// a write then copies the page it changes.
	shared bool
}

func newImage(size int64, base, mid pages) *image {
	return &image{size: size, base: base, mid: mid, top: pages{}}
}

// fork returns a copy of the image that shares its pages; writes to either
// copy what they change.
func (m *image) fork() *image {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return &image{size: m.size, base: m.base, mid: m.mid, top: maps.Clone(m.top), shared: true}
}

// lookup returns page i and whether top owns it.
func (m *image) lookup(i int64) (p *page, own bool) {
	if p := m.top[i]; p != nil {
		return p, true
	}
	if p := m.mid[i]; p != nil {
		return p, false
	}
	return m.base[i], false
}

// readAt copies the image's bytes at off into dst; bytes past the end read
// as zeros.
func (m *image) readAt(dst []byte, off int64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for len(dst) > 0 {
		i, in := off/pageSize, int(off%pageSize)
		n := min(len(dst), pageSize-in)
		if p, _ := m.lookup(i); p != nil {
			copy(dst[:n], p[in:])
		} else {
			clear(dst[:n])
		}
		dst, off = dst[n:], off+int64(n)
	}
}

// writeAt puts src at off (nil src: n zeros), copying each page it changes
// into top first.
func (m *image) writeAt(src []byte, n int, off int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shared {
		// Owning a page only once it is copied: move top's pages
		// below, where writePages copies them on write.
		m.mid = m.flatten()
		m.top, m.shared = pages{}, false
	}
	writePages(m.top, func(i int64) *page { p, _ := m.lookup(i); return p }, src, n, off)
}

// pages returns the image's pages, one layer, shared with it: its pages are
// immutable from then on, as a write copies the page it changes.
func (m *image) pages() pages {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := maps.Clone(m.base)
	if p == nil {
		p = pages{}
	}
	maps.Copy(p, m.flatten())
	m.mid, m.top, m.shared = p, pages{}, false
	return p
}

// flatten returns mid with top's pages over it, sharing the pages.
func (m *image) flatten() pages {
	if len(m.top) == 0 {
		return m.mid
	}
	p := maps.Clone(m.mid)
	if p == nil {
		p = pages{}
	}
	maps.Copy(p, m.top)
	return p
}

// writePages writes src (nil: n zeros) at off into dst, whose pages are the
// caller's own; a page not yet in dst starts as a copy of below(i).
func writePages(dst pages, below func(int64) *page, src []byte, n int, off int64) {
	for n > 0 {
		i, in := off/pageSize, int(off%pageSize)
		k := min(n, pageSize-in)
		p := dst[i]
		if p == nil {
			p = new(page)
			if b := below(i); b != nil {
				*p = *b
			}
			dst[i] = p
		}
		if src == nil {
			clear(p[in : in+k])
		} else {
			copy(p[in:in+k], src[:k])
			src = src[k:]
		}
		n, off = n-k, off+int64(k)
	}
}

// A replay holds the pages a prefix of a log has written over base. Its
// pages are immutable once a snapshot shares them, so apply copies every
// page it changes, and snapshot is a shallow copy.
type replay struct {
	base pages
	cur  pages
}

func (r *replay) apply(src []byte, n int, off int64) {
	fresh := pages{}
	below := func(i int64) *page {
		if p := r.cur[i]; p != nil {
			return p
		}
		return r.base[i]
	}
	writePages(fresh, below, src, n, off)
	maps.Copy(r.cur, fresh)
}

func (r *replay) snapshot() pages { return maps.Clone(r.cur) }

// writeTo makes f hold the image: it punches the whole file and writes the
// image's pages that are not zeros, a run of neighbours at a time.
func (m *image) writeTo(f *os.File) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, m.size); err != nil {
		return err
	}
	idx := make([]int64, 0, len(m.base)+len(m.mid)+len(m.top))
	for _, l := range []pages{m.base, m.mid, m.top} {
		for i := range l {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	const run = 256 // pages per write
	buf := make([]byte, 0, run*pageSize)
	var at int64 = -1
	flush := func() error {
		if len(buf) > 0 {
			if _, err := f.WriteAt(buf, at*pageSize); err != nil {
				return err
			}
		}
		buf, at = buf[:0], -1
		return nil
	}
	for _, i := range idx {
		p, _ := m.lookup(i)
		if *p == (page{}) {
			continue
		}
		if at >= 0 && (i != at+int64(len(buf)/pageSize) || len(buf) == cap(buf)) {
			if err := flush(); err != nil {
				return err
			}
		}
		if at < 0 {
			at = i
		}
		buf = append(buf, p[:]...)
	}
	return flush()
}
