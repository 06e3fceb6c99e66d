package ephemeral

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dio-storage/dio/fallback"
)

// createNamed creates a 0600 file under a random name in dir, with flag
// added to os.OpenFile's, and, when unlink is set, unlinks it before
// returning, so that only the open descriptor keeps it. Windows cannot
// unlink a file it holds open: there the flag deletes it on close instead.
//
// It picks the name itself, the one place in dio that does: os.CreateTemp
// opens with flags of its own, and this file needs fallback.Open's (its
// policy, O_DIRECT, Windows's delete-on-close).
func createNamed(dir string, p fallback.Policy, flag int, unlink bool) (fallback.File, error) {
	for range 10 {
		var b [8]byte
		rand.Read(b[:])
		name := filepath.Join(dir, ".dio-ephemeral-"+hex.EncodeToString(b[:]))
		f, err := fallback.Open(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|flag, 0o600, p)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil || !unlink {
			return f, err
		}
		if err := os.Remove(name); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	return nil, &os.PathError{Op: "create", Path: dir, Err: fs.ErrExist}
}
