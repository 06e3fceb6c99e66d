package aligned

import "golang.org/x/sys/unix"

// mapPopulate faults the pages in at allocation, so that no direct I/O into
// a fresh buffer takes a page fault inside the filesystem: btrfs runs
// direct reads with page faults disabled and retries, and a buffer touched
// first by the kernel is the slow path there.
const mapPopulate = unix.MAP_POPULATE
