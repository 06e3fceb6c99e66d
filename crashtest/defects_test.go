//go:build linux

package crashtest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/crashtest"
	"github.com/dio-storage/dio/direct"
)

// The planted defects: writers and workloads that break a promise on
// purpose, each of which the default run must catch, reporting the crash
// state and the record lost. A harness that finds none of them has not
// been shown to look.

// faultyAppender is an appender on direct.File with a defect to plant: its
// Sync writes the tail (padded to the alignment, rewritten by the next
// Sync, as fileio's does) and then
//   - skipSync: does not fdatasync, yet reports the bytes synced;
//   - dropEarlier: writes the tail's block with zeros where the bytes an
//     earlier Sync put in that block were, instead of carrying them.
type faultyAppender struct {
	f                     *direct.File
	buf                   *aligned.Buffer
	align                 int64
	start                 int64  // the file offset of buf's first byte: the tail block's
	data                  []byte // the bytes from start on
	fresh                 int64  // the offset from which data is new since the last Sync
	synced                int64
	skipSync, dropEarlier bool
}

func newFaultyAppender(path string, skipSync, dropEarlier bool) (*faultyAppender, error) {
	f, err := direct.Open(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	// The name is made durable as fileio.Create does, so that what the
	// defects lose is bytes.
	if err := syncDir(filepath.Dir(path)); err != nil {
		f.Close()
		return nil, err
	}
	a := int64(f.Alignment().Offset)
	buf, err := aligned.New(1<<20, f.Alignment().Memory)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &faultyAppender{f: f, buf: buf, align: a, skipSync: skipSync, dropEarlier: dropEarlier}, nil
}

func (w *faultyAppender) Write(p []byte) (int, error) {
	w.data = append(w.data, p...)
	return len(p), nil
}

func (w *faultyAppender) Sync() error {
	end := w.start + int64(len(w.data))
	padded := (int64(len(w.data)) + w.align - 1) / w.align * w.align
	if padded > int64(len(w.buf.Bytes())) {
		return fmt.Errorf("faultyAppender: %d bytes between Syncs, more than its buffer", len(w.data))
	}
	b := w.buf.Bytes()[:padded]
	clear(b)
	copy(b, w.data)
	if w.dropEarlier && w.fresh > w.start {
		clear(b[:w.fresh-w.start])
	}
	if _, err := w.f.WriteAt(b, w.start); err != nil {
		return err
	}
	if !w.skipSync {
		if err := w.f.Sync(); err != nil {
			return err
		}
	}
	// Keep the unaligned tail's block for the next Sync to rewrite.
	keep := end / w.align * w.align
	w.data = w.data[keep-w.start:]
	w.start, w.fresh, w.synced = keep, end, end
	return nil
}

func (w *faultyAppender) Synced() int64 { return w.synced }

func (w *faultyAppender) Close() error {
	err := w.Sync()
	w.buf.Free()
	return errorsJoin(err, w.f.Close())
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// mustCatch runs c and fails the test unless a crash state failed; it logs
// the first failure, which names the state and what was lost.
func mustCatch(t *testing.T, c crashtest.Config) *crashtest.Report {
	t.Helper()
	rep := run(t, c)
	if rep.FailedStates == 0 {
		t.Fatalf("the planted defect was not caught in %d crash states (seed %d)", rep.States, rep.Seed)
	}
	t.Logf("caught in %d of %d states; first: %v", rep.FailedStates, rep.States, rep.Failures[0])
	return rep
}

// TestDefectSyncWithoutFdatasync also keeps the failing states
// (Config.KeepFailed) and replays the first: the same loss again.
func TestDefectSyncWithoutFdatasync(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			w := &fileioRecords{syncs: 150, maxRec: 8000, create: func(path string) (appender, error) {
				return newFaultyAppender(path, true, false)
			}}
			rep := mustCatch(t, crashtest.Config{FS: f, Workload: w.workload, Check: w.check, KeepFailed: t.TempDir()})
			first := rep.Failures[0]
			if first.Image == "" {
				t.Fatalf("the failing state was not kept: %v", first)
			}
			err := crashtest.Replay(context.Background(), f, first.Image, 0, w.check)
			if err == nil || !strings.Contains(err.Error(), first.Err.Error()) {
				t.Fatalf("replaying %s: %v, want %v", first.Image, err, first.Err)
			}
			t.Logf("replayed: %v", err)
		})
	}
}

func TestDefectTailRewrite(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			w := &fileioRecords{syncs: 150, maxRec: 8000, create: func(path string) (appender, error) {
				return newFaultyAppender(path, false, true)
			}}
			mustCatch(t, crashtest.Config{FS: f, Workload: w.workload, Check: w.check})
		})
	}
}

// TestFaultyAppenderSound runs the faulty appender with no defect planted:
// it must pass, so that what the defect tests catch is the defect.
func TestFaultyAppenderSound(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			w := &fileioRecords{syncs: 60, maxRec: 8000, create: func(path string) (appender, error) {
				return newFaultyAppender(path, false, false)
			}}
			mustPass(t, crashtest.Config{FS: f, Workload: w.workload, Check: w.check, States: 200})
		})
	}
}

func TestDefectCreateWithoutDirSync(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			w := &renames{files: 80, skipDirSync: true}
			mustCatch(t, crashtest.Config{FS: f, Workload: w.workload, Check: w.check})
		})
	}
}
