// Package fallback opens files for dio's writers and readers with the best
// I/O path the filesystem allows, and says which one it chose and why.
//
// Policy Auto tries O_DIRECT with io_uring, degrades to O_DIRECT with the
// pwrite engine when io_uring is unavailable, and to the page cache (std-fs)
// when the filesystem rejects O_DIRECT (ramfs, some FUSE and overlay
// setups). There it prefers uncached buffered writes (RWF_DONTCACHE, Linux
// 6.14 and later), probed with a real write per file, over the plain page
// cache. Direct never degrades to the page cache; StdFS always uses it;
// DontCache uses uncached writes where the filesystem takes them.
// Every File, direct or not, honours the same contract, so callers such as
// blobio and ephemeral run unchanged on either path.
//
// Untorn writes (direct.File.WriteAtomicAt) are the one thing the
// contract does not level: a File through the page cache has none, nor
// do most filesystems under O_DIRECT (see direct.File.AtomicWrite). A
// program that rewrites pages in place on such a file must not rely on a
// rewrite being whole after a power cut: it checksums each page and keeps
// a copy of the page elsewhere until the rewrite is synced (a journal or
// InnoDB's double-write buffer), or never rewrites in place and appends
// new versions instead (package blobio), switching to them after a Sync.
package fallback
