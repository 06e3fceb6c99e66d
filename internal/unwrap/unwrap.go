// Package unwrap gives blobio's Reader the file behind a fileio.Reader,
// without making it public: a blob reader reads through the Reader's file
// with queues of its own.
//
// Package fileio sets the function in its init; a package that imports
// fileio may call it. Its argument is a *fileio.Reader, taken as any
// because this package sits below fileio and cannot name it.
package unwrap

import "github.com/dio-storage/dio/fallback"

// File returns the file behind a *fileio.Reader.
var File func(r any) fallback.File
