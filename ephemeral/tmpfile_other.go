//go:build !linux && !windows

package ephemeral

import "github.com/dio-storage/dio/fallback"

// createTemp creates a named file in dir and unlinks it at once (darwin,
// the BSDs).
func createTemp(dir string, p fallback.Policy) (fallback.File, error) {
	return createNamed(dir, p, 0, true)
}
