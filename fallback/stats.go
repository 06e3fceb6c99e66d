package fallback

import (
	"errors"
	"sync/atomic"

	"github.com/dio-storage/dio/direct"
)

// OpenStats counts the files Open opened since the process started, by
// the path it chose, and the fallbacks it took, by cause: the part of a
// service's I/O statistics that direct.Stats cannot see. A file that
// fell back twice (O_DIRECT refused, then RWF_DONTCACHE) counts under
// both causes.
type OpenStats struct {
	// Files opened by Mode: direct+io_uring, direct+pwrite, std-fs and
	// std-fs+dontcache.
	URing, Pwrite, StdFS, DontCache uint64

	NoURing      uint64 // O_DIRECT without io_uring: the kernel or a sandbox refuses it (direct.URingError)
	URingAvoided uint64 // O_DIRECT without io_uring: a filesystem it is avoided on (ErrURingAvoided)
	NoDirect     uint64 // the page cache: the filesystem refused O_DIRECT (Auto)
	NoDontCache  uint64 // the plain page cache: the filesystem refused RWF_DONTCACHE

	// LastReason is the Mode, with its reason, of the last file that
	// fell back: "std-fs: ramfs rejected O_DIRECT: invalid argument;
	// RWF_DONTCACHE: operation not supported". Empty until one did.
	LastReason string
}

// Stats returns the counts of Open since the process started.
func Stats() OpenStats {
	s := OpenStats{
		URing:        opens.uring.Load(),
		Pwrite:       opens.pwrite.Load(),
		StdFS:        opens.stdFS.Load(),
		DontCache:    opens.dontCache.Load(),
		NoURing:      opens.noURing.Load(),
		URingAvoided: opens.uringAvoided.Load(),
		NoDirect:     opens.noDirect.Load(),
		NoDontCache:  opens.noDontCache.Load(),
	}
	if r := opens.last.Load(); r != nil {
		s.LastReason = *r
	}
	return s
}

// Sub returns s minus prev, an earlier snapshot; LastReason is s's.
func (s OpenStats) Sub(prev OpenStats) OpenStats {
	s.URing -= prev.URing
	s.Pwrite -= prev.Pwrite
	s.StdFS -= prev.StdFS
	s.DontCache -= prev.DontCache
	s.NoURing -= prev.NoURing
	s.URingAvoided -= prev.URingAvoided
	s.NoDirect -= prev.NoDirect
	s.NoDontCache -= prev.NoDontCache
	return s
}

// opens holds the process's counts of Open, which are process wide by
// nature, as direct's statistics are.
var opens struct {
	uring, pwrite, stdFS, dontCache              atomic.Uint64
	noURing, uringAvoided, noDirect, noDontCache atomic.Uint64
	last                                         atomic.Pointer[string]
}

// counted counts a file Open opened with policy p.
func counted(f File, p Policy) {
	m := f.Mode()
	switch m.Name() {
	case "direct+io_uring":
		opens.uring.Add(1)
	case "direct+pwrite":
		opens.pwrite.Add(1)
	case "std-fs+dontcache":
		opens.dontCache.Add(1)
	default:
		opens.stdFS.Add(1)
	}
	if m.Reason != "" && p != DirectPwrite { // DirectPwrite's reason is the policy
		s := m.String()
		opens.last.Store(&s)
	}
}

// countURing counts a direct file left without io_uring by uerr.
func countURing(uerr error) {
	if errors.Is(uerr, ErrURingAvoided) {
		opens.uringAvoided.Add(1)
	} else {
		opens.noURing.Add(1)
	}
}

// Path returns the direct.Path of the mode's I/O, under which
// direct.Stats counts it.
func (m Mode) Path() direct.Path {
	switch {
	case !m.Direct:
		return direct.PathStdFS
	case m.Engine == direct.EngineURing:
		return direct.PathURing
	}
	return direct.PathPwrite
}

// WithMeter returns a File over f's descriptor whose I/O, through its
// methods and every queue made from it, is counted in m as well as
// process wide, and watched when m has a direct.SlowPolicy; m counts
// what its owner asks for under f's Mode's Path. f must come from Open
// (see WithFaults). Closing either File closes both.
func WithMeter(f File, m *direct.Meter) File {
	ff := own(f, "WithMeter")
	if m != nil {
		defer m.UsePath(ff.mode.Path()) // after File.WithMeter's guess
	}
	return &file{File: ff.File.WithMeter(m), mode: ff.mode}
}
