//go:build !linux

package fallback

import (
	"errors"
	"os"
)

// rwfDontCache is Linux's; elsewhere no write carries it.
const rwfDontCache = 0

func probeDontCache(*os.File, int) error { return errors.ErrUnsupported }

func pwriteDontCache(*os.File, []byte, int64) (int, error) { return 0, errors.ErrUnsupported }
