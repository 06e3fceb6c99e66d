package fileio

import (
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/unwrap"
)

// What blobio reaches through package unwrap.
func init() {
	unwrap.File = func(r any) fallback.File { return r.(*Reader).f }
}
