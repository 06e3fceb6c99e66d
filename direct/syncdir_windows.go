package direct

// SyncDir does nothing on windows, which cannot open a directory for
// FlushFileBuffers without backup semantics and makes a file's name
// durable with the file.
func SyncDir(string, *Meter) error { return nil }
