//go:build linux

package crashtest_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/dio-storage/dio/crashtest"
	"github.com/dio-storage/dio/fileio"
)

// A service that appends records to a file and acknowledges them once a
// Sync returned checks that no crash loses an acknowledged byte: its
// workload marks each Synced, its checker reads the file back as its
// recovery would (Options.Size: the size it recorded). The example prints
// nothing when every state passes, and nothing where the machine cannot
// run the harness (not root, no /dev/fuse, no loop devices).
func Example() {
	record := func(i int) []byte { return fmt.Appendf(nil, "record %d;", i) }
	workload := func(ctx context.Context, r *crashtest.Recorder) error {
		w, err := fileio.Create(filepath.Join(r.Dir, "log"), nil)
		if err != nil {
			return err
		}
		for i := range 100 {
			if _, err := w.Write(record(i)); err != nil {
				return err
			}
			if i%10 == 9 {
				if err := w.Sync(); err != nil {
					return err
				}
				r.Mark(binary.AppendUvarint(nil, uint64(w.Synced())))
			}
		}
		return w.Close()
	}
	check := func(ctx context.Context, s *crashtest.State) error {
		if s.Last() == nil {
			return nil // nothing acknowledged yet
		}
		synced, _ := binary.Uvarint(s.Last())
		r, err := fileio.Open(filepath.Join(s.Dir, "log"), &fileio.Options{Size: int64(synced)})
		if err != nil {
			return err
		}
		defer r.Close()
		got := make([]byte, synced)
		if _, err := r.ReadAt(got, 0); err != nil {
			return err
		}
		var want []byte
		for i := 0; len(want) < len(got); i++ {
			want = append(want, record(i)...)
		}
		if string(got) != string(want[:len(got)]) {
			return fmt.Errorf("the %d synced bytes are not the records written", synced)
		}
		return nil
	}
	rep, err := crashtest.Run(context.Background(), crashtest.Config{
		FS: crashtest.Ext4, Workload: workload, Check: check, States: 50,
	})
	if errors.Is(err, crashtest.ErrUnavailable) {
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := rep.Err(); err != nil {
		fmt.Println(err)
	}
	// Output:
}
