//go:build !linux

package fallback_test

import (
	"errors"
	"testing"
)

// dontCacheErr is what fallback says of RWF_DONTCACHE off Linux.
func dontCacheErr(*testing.T, string) string { return errors.ErrUnsupported.Error() }
