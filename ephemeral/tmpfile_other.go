//go:build !linux

package ephemeral

import "github.com/dio-storage/dio/fallback"

func createTemp(dir string, p fallback.Policy) (fallback.File, error) {
	return createNamed(dir, p)
}
