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

// createNamed creates a 0600 file under a random name in dir and unlinks it
// before returning, so only the open descriptor keeps it.
func createNamed(dir string, p fallback.Policy) (fallback.File, error) {
	for range 10 {
		var b [8]byte
		rand.Read(b[:])
		name := filepath.Join(dir, ".dio-ephemeral-"+hex.EncodeToString(b[:]))
		f, err := fallback.Open(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600, p)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := os.Remove(name); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	return nil, &os.PathError{Op: "create", Path: dir, Err: fs.ErrExist}
}
