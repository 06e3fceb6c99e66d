//go:build linux

package crashtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/dio-storage/dio/crashtest"
	"github.com/dio-storage/dio/fileio"
)

// renames is the workload of a file made durable under its name: each file
// created with fileio (its directory fsynced by Create, or with NoDirSync
// by the caller, as the docs ask), written, synced, closed, renamed to its
// final name and the directory fsynced. Marks: "c<i>" once file i's first
// name is durable, "r<i>" once its final name is.
type renames struct {
	files     int
	noDirSync bool
	// skipDirSync plants a defect: NoDirSync, and the caller does not
	// sync the directory either, yet marks the new name as durable.
	skipDirSync bool

	data [][]byte
}

func tmpName(i int) string   { return fmt.Sprintf("tmp%03d", i) }
func finalName(i int) string { return fmt.Sprintf("file%03d", i) }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (w *renames) workload(ctx context.Context, r *crashtest.Recorder) error {
	w.data = nil
	rng := rand.New(rand.NewPCG(r.Seed, 3))
	all := stream(r.Seed, w.files*20000)
	o := &fileio.Options{NoDirSync: w.noDirSync || w.skipDirSync}
	for i := range w.files {
		p := all[i*20000 : i*20000+1+rng.IntN(20000)]
		w.data = append(w.data, p)
		tmp := filepath.Join(r.Dir, tmpName(i))
		f, err := fileio.Create(tmp, o)
		if err != nil {
			return err
		}
		if w.noDirSync {
			if err := syncDir(r.Dir); err != nil {
				return err
			}
		}
		r.Mark(fmt.Appendf(nil, "c%d", i))
		if _, err := f.Write(p); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(r.Dir, finalName(i))); err != nil {
			return err
		}
		if err := syncDir(r.Dir); err != nil {
			return err
		}
		r.Mark(fmt.Appendf(nil, "r%d", i))
	}
	return nil
}

func (w *renames) check(ctx context.Context, s *crashtest.State) error {
	created, renamed := map[int]bool{}, map[int]bool{}
	for _, m := range s.Marks {
		var i int
		if _, err := fmt.Sscanf(string(m[1:]), "%d", &i); err != nil {
			return err
		}
		if m[0] == 'c' {
			created[i] = true
		} else {
			renamed[i] = true
		}
	}
	for i := range w.data {
		final, err := os.ReadFile(filepath.Join(s.Dir, finalName(i)))
		switch {
		case err == nil:
			// A rename is atomic: the final name, if there, has
			// every byte synced before it.
			if !bytes.Equal(final, w.data[i]) {
				return fmt.Errorf("%s has %d bytes, not the %d synced before the rename (renamed acknowledged: %v)", finalName(i), len(final), len(w.data[i]), renamed[i])
			}
			continue
		case !errors.Is(err, fs.ErrNotExist):
			return err
		case renamed[i]:
			return fmt.Errorf("%s lost: renamed and its directory synced", finalName(i))
		}
		tmp, err := os.ReadFile(filepath.Join(s.Dir, tmpName(i)))
		switch {
		case err == nil:
			if !zeroedCopy(tmp, w.data[i]) {
				return fmt.Errorf("phantom: %s holds bytes never written to it", tmpName(i))
			}
		case !errors.Is(err, fs.ErrNotExist):
			return err
		case created[i]:
			return fmt.Errorf("%s lost: created and its name acknowledged durable, neither it nor %s is there", tmpName(i), finalName(i))
		}
	}
	// The directory takes a new file and its name survives the unmount.
	f, err := fileio.Create(filepath.Join(s.Dir, "after"), nil)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte("after the crash")); err != nil {
		return err
	}
	return f.Close()
}

func TestRename(t *testing.T) {
	for _, f := range filesystems {
		for _, noDirSync := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/NoDirSync=%v", f, noDirSync), func(t *testing.T) {
				w := &renames{files: 80, noDirSync: noDirSync}
				mustPass(t, crashtest.Config{FS: f, Workload: w.workload, Check: w.check})
			})
		}
	}
}
