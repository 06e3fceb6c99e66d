package fileio

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/testenv"
)

// TestNoDirSync: Create fsyncs the new file's directory once by default,
// and a failed fsync leaves no file; with Options.NoDirSync it never
// does, so even a failing one cannot stop it, and the file is written and
// closed as any other.
func TestNoDirSync(t *testing.T) {
	dir := testenv.Dir(t)
	errDir := errors.New("directory fsync failed")
	for _, tc := range []struct {
		name      string
		noDirSync bool
		fail      bool
		syncs     int
		created   bool
	}{
		{"default", false, false, 1, true},
		{"default/fails", false, true, 1, false},
		{"NoDirSync", true, false, 0, true},
		{"NoDirSync/fails", true, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, "/", "-"))
			var synced []string
			dirSync := func(d string) error {
				synced = append(synced, d)
				if tc.fail {
					return errDir
				}
				return nil
			}
			w, err := create(path, &Options{NoDirSync: tc.noDirSync}, dirSync)
			require.Len(t, synced, tc.syncs)
			if tc.syncs > 0 {
				require.Equal(t, dir, synced[0], "the directory synced is the file's")
			}
			if !tc.created {
				require.ErrorIs(t, err, errDir)
				_, err := os.Stat(path)
				require.ErrorIs(t, err, fs.ErrNotExist, "a Create whose directory fsync failed left its file")
				return
			}
			require.NoError(t, err)
			_, err = w.Write([]byte("pebble"))
			require.NoError(t, err)
			require.NoError(t, w.Close())
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, "pebble", string(got))
			require.Len(t, synced, tc.syncs, "Write and Close never sync the directory")
		})
	}
}
