package fallback

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// A Report is what Open with Auto chooses for a file in a directory, and
// the answers that choice is made of: Probe's result, which dio-check
// prints.
type Report struct {
	// Mode is what Open with Auto chose for a file there, and why.
	Mode Mode
	// Direct is why O_DIRECT is refused there (at the open, or at the
	// first aligned read, where some filesystems refuse it later); nil:
	// it works.
	Direct error
	// URing is why the io_uring engine is not used there (URingErrorAt);
	// nil: it is, wherever O_DIRECT is.
	URing error
	// DontCache is why uncached buffered writes (RWF_DONTCACHE) do not
	// work there, which the page cache path would use; nil: they work.
	DontCache error
	// Check is the error of a real aligned write and read back through
	// the file Open chose, and a queue of its engine, which must succeed
	// wherever dio writes; nil: they did.
	Check error
}

// Probe reports what Open with Auto would choose for a file in dir, by
// opening real ones: a temporary file, created exclusively under a random
// name and removed before Probe returns (ProbeFile). An error means dir
// cannot hold a file (missing, not a directory, not writable).
func Probe(dir string) (Report, error) {
	path, err := probeFile(dir)
	if err != nil {
		return Report{}, err
	}
	defer os.Remove(path)
	return ProbeFile(path)
}

// ProbeFile is Probe on the file at path, a file of the caller's (one it
// removes on every exit path, a signal's included), which ProbeFile
// writes one block to and leaves empty.
func ProbeFile(path string) (Report, error) {
	if err := os.WriteFile(path, make([]byte, probeBlock), 0o600); err != nil {
		return Report{}, err
	}
	var r Report
	// Open's own steps, one by one: O_DIRECT and the first aligned
	// read, the engine's policy, then the whole choice.
	df, err := openDirect(path, os.O_RDWR, 0)
	if err == nil {
		err = probe(df)
		df.Close()
	}
	r.Direct = err
	r.URing = URingErrorAt(path)
	f, err := Open(path, os.O_RDWR, 0, Auto)
	if err != nil {
		return r, err
	}
	r.Mode = f.Mode()
	r.Check = check(f)
	f.Close()
	// Uncached writes are probed on an empty file, as a new one is.
	if err := os.Truncate(path, 0); err != nil {
		return r, err
	}
	sf, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return r, err
	}
	r.DontCache = probeDontCache(direct.Buffered(sf), os.O_RDWR)
	sf.Close()
	return r, nil
}

// probeBlock is the probe file's content and the check's transfer: the
// largest alignment direct.Open assumes where nothing says.
const probeBlock = direct.DefaultAlignment

// probeFile creates an empty file in dir under a random name.
func probeFile(dir string) (string, error) {
	for range 10 {
		var b [8]byte
		rand.Read(b[:])
		path := filepath.Join(dir, ".dio-probe-"+hex.EncodeToString(b[:]))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		return path, f.Close()
	}
	return "", &os.PathError{Op: "create", Path: dir, Err: fs.ErrExist}
}

// check writes a block through a queue of f's engine and reads it back.
func check(f File) error {
	a := f.Alignment()
	n := max(a.Block(), probeBlock)
	buf, err := aligned.New(2*n, max(a.Memory, direct.MinAlignment))
	if err != nil {
		return err
	}
	defer buf.Free()
	w, r := buf.Bytes()[:n], buf.Bytes()[n:]
	rand.Read(w)
	q, err := f.NewQueue(&direct.QueueOptions{Depth: 1})
	if err != nil {
		return err
	}
	defer q.Close()
	done := make(chan direct.Completion, 1)
	for _, req := range []direct.Request{{Op: direct.OpWrite, Buf: w, Done: done}, {Op: direct.OpRead, Buf: r, Done: done}} {
		if err := q.Submit(req); err != nil {
			return err
		}
		if c := q.Await(done); c.Err != nil || c.N != n {
			return fmt.Errorf("%v of %d bytes through %s: %d, %v", req.Op, n, f.Mode().Name(), c.N, c.Err)
		}
	}
	if string(w) != string(r) {
		return fmt.Errorf("a block written through %s read back different", f.Mode().Name())
	}
	return nil
}
