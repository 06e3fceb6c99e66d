//go:build !linux

package fallback

import (
	"errors"

	"github.com/dio-storage/dio/direct"
)

// rwfDontCache is Linux's; elsewhere no write carries it.
const rwfDontCache = 0

func probeDontCache(*direct.File, int) error { return errors.ErrUnsupported }
