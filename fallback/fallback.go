package fallback

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// Policy says how Open may choose an I/O path.
type Policy int

// The policies.
const (
	Auto   Policy = iota // O_DIRECT+io_uring, else O_DIRECT+pwrite, else std-fs
	Direct               // O_DIRECT or an error matching direct.ErrNotSupported
	StdFS                // the page cache, always

	// DirectPwrite is Direct with the pwrite engine even where io_uring
	// works: for comparing engines, and for sandboxes that allow io_uring
	// but make it slow.
	DirectPwrite

	// DontCache is std-fs with uncached buffered writes (RWF_DONTCACHE,
	// Linux 6.14 and later): the kernel writes the data back and drops
	// it from the page cache at once. Where the filesystem refuses the
	// flag it is the plain page cache, and Mode says why.
	DontCache
)

// Valid reports whether p is one of the policies above, so that callers
// can refuse a bad one before creating anything.
func (p Policy) Valid() bool { return p >= Auto && p <= DontCache }

func (p Policy) String() string {
	switch p {
	case Auto:
		return "auto"
	case Direct:
		return "direct"
	case StdFS:
		return "std-fs"
	case DirectPwrite:
		return "direct+pwrite"
	case DontCache:
		return "std-fs+dontcache"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Mode is the I/O path a File uses, and why when it is not the best one.
type Mode struct {
	Direct    bool              // O_DIRECT is set
	DontCache bool              // without O_DIRECT: writes carry RWF_DONTCACHE
	Engine    direct.EngineKind // the engine its queues use
	Reason    string            // why the path is degraded; empty when it is not
}

// Name returns "direct+io_uring", "direct+pwrite", "std-fs+dontcache" or
// "std-fs".
func (m Mode) Name() string {
	switch {
	case m.Direct:
		return "direct+" + m.Engine.String()
	case m.DontCache:
		return "std-fs+dontcache"
	}
	return "std-fs"
}

// String returns the name and, when degraded, the reason:
// "std-fs: ramfs rejected O_DIRECT: invalid argument; RWF_DONTCACHE:
// operation not supported".
func (m Mode) String() string {
	if m.Reason == "" {
		return m.Name()
	}
	return m.Name() + ": " + m.Reason
}

// File is the contract blobio and ephemeral write and read through. Direct
// files demand aligned transfers (see direct.File); std-fs files accept any
// offset and length and report Alignment{1, 1}.
type File interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Close() error
	Sync() error
	Truncate(size int64) error
	Alignment() direct.Alignment
	Mode() Mode

	// Allocate reserves [off, off+n), growing the file; an error matching
	// errors.ErrUnsupported means the filesystem cannot.
	Allocate(off, n int64) error
	// NewQueue returns an asynchronous queue over the file using the
	// engine of its Mode; o.Engine and o.Alignment are ignored.
	NewQueue(o *direct.QueueOptions) (direct.Queue, error)
	// Name returns the name the file was opened with.
	Name() string
	// Stat returns the file's os.FileInfo.
	Stat() (os.FileInfo, error)
	// Fd returns the file descriptor, for inspection (fstat, mincore);
	// reads and writes go through the methods above.
	Fd() uintptr
}

type file struct {
	*direct.File
	mode Mode
}

func (f *file) Mode() Mode { return f.mode }

func (f *file) NewQueue(o *direct.QueueOptions) (direct.Queue, error) {
	var opts direct.QueueOptions
	if o != nil {
		opts = *o
	}
	opts.Engine = f.mode.Engine
	return f.File.NewQueue(&opts)
}

// Open opens name with os.OpenFile's flag and perm, choosing the I/O path by
// policy. The File reports the choice through Mode, and Stats counts it.
func Open(name string, flag int, perm os.FileMode, p Policy) (File, error) {
	f, err := open(name, flag, perm, p)
	if err == nil {
		counted(f, p)
	}
	return f, err
}

func open(name string, flag int, perm os.FileMode, p Policy) (File, error) {
	switch p {
	case StdFS:
		return openStd(name, flag, perm, "")
	case DontCache:
		return openDontCache(name, flag, perm, "")
	case Auto, Direct, DirectPwrite:
	default:
		return nil, fmt.Errorf("fallback: unknown policy %v", p)
	}
	df, err := openDirect(name, flag, perm)
	if err == nil {
		err = probe(df)
		if err != nil {
			df.Close()
		}
	}
	if err != nil {
		if p == Auto && errors.Is(err, direct.ErrNotSupported) {
			f, err := openDontCache(name, flag, perm, rejection(name, err))
			if err == nil {
				opens.noDirect.Add(1)
			}
			return f, err
		}
		return nil, err
	}
	mode := Mode{Direct: true, Engine: direct.EngineURing}
	if p == DirectPwrite {
		mode = Mode{Direct: true, Engine: direct.EnginePwrite, Reason: "chosen by policy"}
	} else if uerr := URingErrorAt(name); uerr != nil {
		mode = Mode{Direct: true, Engine: direct.EnginePwrite, Reason: uerr.Error()}
		countURing(uerr)
	}
	return &file{File: df, mode: mode}, nil
}

// openDirect is direct.Open; tests replace it to refuse O_DIRECT on a
// filesystem that takes RWF_DONTCACHE, which no filesystem here does.
var openDirect = direct.Open

func openStd(name string, flag int, perm os.FileMode, reason string) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &file{File: direct.Buffered(f), mode: Mode{Engine: direct.EnginePwrite, Reason: reason}}, nil
}

// openDontCache opens a std-fs file whose writes, through WriteAt and its
// queues, carry RWF_DONTCACHE where a real write with the flag succeeds,
// else a plain std-fs file. Reads go through the page cache as usual. why
// is the reason O_DIRECT was not used, if it was tried.
func openDontCache(name string, flag int, perm os.FileMode, why string) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	df := direct.Buffered(f)
	perr := probeDontCache(df, flag)
	if perr != nil {
		reason := "RWF_DONTCACHE: " + perr.Error()
		if why != "" {
			reason = why + "; " + reason
		}
		opens.noDontCache.Add(1)
		return &file{File: df, mode: Mode{Engine: direct.EnginePwrite, Reason: reason}}, nil
	}
	return &file{File: df.WithWriteFlags(rwfDontCache), mode: Mode{DontCache: true, Engine: direct.EnginePwrite, Reason: why}}, nil
}

// WithFaults returns a File over f's descriptor whose reads, writes and
// fdatasyncs, through its methods and every queue made from it, consult
// inj before each system call: the one seam for fault injection, under
// the engine's retries and resumption (see direct.File.WithFaults). It is
// how blobio and ephemeral apply their Options.Faults. f must come from
// Open: any other File has no engine of direct's underneath, and
// WithFaults panics rather than return a File that injects nothing.
// Closing either File closes both.
func WithFaults(f File, inj direct.Injector) File {
	ff := own(f, "WithFaults")
	return &file{File: ff.File.WithFaults(inj), mode: ff.mode}
}

// own returns f as Open made it, or panics naming the caller, what.
func own(f File, what string) *file {
	ff, ok := f.(*file)
	if !ok {
		panic(fmt.Sprintf("fallback: %s of a %T, not a File from Open", what, f))
	}
	return ff
}

// probe reads the first block of a non-empty file: some filesystems accept
// O_DIRECT at open and refuse the first transfer.
func probe(f *direct.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	a := f.Alignment()
	b, err := aligned.New(a.Block(), a.Memory)
	if err != nil {
		return err
	}
	defer b.Free()
	_, err = f.ReadAt(b.Bytes(), 0)
	if err != nil && errors.Is(err, direct.ErrNotSupported) {
		return err
	}
	return nil
}

// rejection words why O_DIRECT was refused: "ramfs rejected O_DIRECT:
// invalid argument".
func rejection(name string, err error) string {
	fs, ferr := direct.Filesystem(name)
	if ferr != nil {
		fs, ferr = direct.Filesystem(filepath.Dir(name))
	}
	if ferr != nil {
		fs = "the filesystem"
	}
	cause := err
	var errno syscall.Errno
	if errors.As(err, &errno) {
		cause = errno
	}
	return fmt.Sprintf("%s rejected O_DIRECT: %v", fs, cause)
}
