package appender

import "github.com/dio-storage/dio/direct"

// SyncDir fsyncs the directory dir, making the names in it durable, as
// direct.SyncDir does (counted process wide; a file Create opens counts
// its own in its Meter).
func SyncDir(dir string) error { return direct.SyncDir(dir, nil) }
