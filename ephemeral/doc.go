// Package ephemeral provides a temporary, append-only file for data that
// lives only as long as the process needs it, such as a database's
// in-memory layer spilled to disk: the counterpart of Neon's EphemeralFile.
//
// The file has no name (O_TMPFILE where the filesystem allows it, else a
// random name unlinked at once), so it is gone when it is closed or when
// the process dies. Appends fill aligned buffers that are written with
// O_DIRECT while the next ones fill; reads are served from those buffers
// while they hold the bytes, and from the disk with aligned reads
// otherwise, so readers see every appended byte at once, concurrently with
// the writer.
package ephemeral
