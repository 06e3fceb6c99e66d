package benchkit

import (
	"crypto/rand"
	"os"
)

// writeChunk is how much WriteHot writes at a time.
const writeChunk = 1 << 20

// WriteHot writes a co-tenant's hot file at path, size bytes that no
// filesystem can deduplicate or compress, and syncs it, so that its pages
// are clean and reclaim can drop them as it would a database's; it
// returns the file open.
func WriteHot(path string, size int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, writeChunk)
	rand.Read(buf)
	for off := int64(0); off < size; off += writeChunk {
		n := min(int64(len(buf)), size-off)
		// Vary the chunks so that no filesystem deduplicates them.
		for i := range 8 {
			buf[i] = byte(off >> (8 * i))
		}
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
