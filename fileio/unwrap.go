package fileio

import (
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/appender"
	"github.com/dio-storage/dio/internal/unwrap"
)

// What blobio reaches through package unwrap.
func init() {
	unwrap.Appender = func(w any) *appender.Appender { return w.(*Writer).ap }
	unwrap.File = func(r any) fallback.File { return r.(*Reader).f }
	unwrap.Create = func(path string, o any, dirSync func(string) error) (any, error) {
		w, err := create(path, o.(*Options), dirSync)
		if err != nil {
			return nil, err // a nil *Writer in an any would not be nil
		}
		return w, nil
	}
}
