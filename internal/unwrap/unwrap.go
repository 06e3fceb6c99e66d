// Package unwrap gives the packages built on fileio (blobio) what
// fileio's Writer and Reader are made of, without making it public: a
// blob writer frames records straight into the Writer's appender (one
// copy, one publish) and commits a Log's groups through it, and a blob
// reader reads through the Reader's file with queues of its own.
//
// Package fileio sets the functions in its init; a package that imports
// fileio may call them. Their arguments are fileio's types, taken as any
// because this package sits below fileio and cannot name them.
package unwrap

import (
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/appender"
)

var (
	// Appender returns the Appender behind a *fileio.Writer.
	Appender func(w any) *appender.Appender

	// File returns the file behind a *fileio.Reader.
	File func(r any) fallback.File

	// Create is fileio.Create with the directory's fsync as a parameter
	// (for a test to count): o is a *fileio.Options, the result a
	// *fileio.Writer.
	Create func(path string, o any, dirSync func(dir string) error) (any, error)
)
