// Package crashtest checks what a program's files hold after a power cut,
// at every point a power cut could come, on a real ext4 or xfs: a recording
// disk and a replay of its crash states, the technique of Linux's
// dm-log-writes and CrashMonkey, in user space (no device-mapper, no kernel
// module).
//
// # The recording disk
//
// The disk is an image held in memory and served as a file by a FUSE server
// in the test's own process (go-fuse), opened without a page cache
// (FOPEN_DIRECT_IO). A loop device is attached to that file with the loop
// driver's direct I/O off, so that every write the filesystem sends to the
// disk reaches the server, and every flush (a REQ_PREFLUSH, or the flush
// after a FUA write, which the loop driver does not offer) reaches it as an
// fsync of the file. The server logs them in the order it receives them.
// The harness checks at start-up that a write and a flush of the loop
// device arrive as such, and refuses to run where they do not
// (ErrUnavailable). ext4 is made on a disk of 512-byte sectors, xfs on one
// of 4 KiB sectors with reflink, which gives xfs untorn writes
// (direct.File.WriteAtomicAt).
//
// Run mounts a fresh filesystem on the disk and runs a workload on it. The
// workload writes as the program would and calls Recorder.Mark each time it
// has acknowledged something (a Sync returned, a file was renamed and its
// directory synced); marks go into the same log as the writes and flushes.
//
// # Crash states
//
// A disk with a volatile write cache may lose, at a power cut, any write
// not yet covered by a flush, keep any others, and tear a write in flight
// at its sector size. From the log Run builds such states:
//
//   - every flush (KindFlush): every write before it, none after;
//   - between two flushes (KindSubset): every write before the first,
//     and a random subset of those since, applied in random order;
//   - a torn write (KindTorn): a subset, and one more write of which
//     only some sectors landed.
//
// Each state is the image it leaves, written to a file on a tmpfs with a
// loop device on it (reads there need no round trip to this process),
// mounted (so the filesystem's journal recovery runs) and handed to the
// checker with every mark made before the crash: a state between two
// flushes comes with every mark made before the second, since whatever a
// mark made there acknowledged was flushed by the first. The checker reads
// the files as the program's recovery would and returns an error if a
// promise is broken: an acknowledged byte missing or changed, a record
// returned that was never written, a file that cannot be reopened and
// written. A state whose mount or check takes longer than Config.Timeout
// is reported as hung; Report says what failed, with each state's name
// (its flush, the writes it kept, the sectors of the torn one), and how
// the time went. Config.KeepFailed keeps failing states' images, which
// Replay checks again.
//
// # Faults
//
// Disk is the recording disk without the replay: tests make it fail
// chosen sectors' reads with EIO until they are written again (as dm-dust
// does), and chosen writes and flushes, under a real filesystem; the
// sectors are found from a file's bytes (FIEMAP). A workload can do the
// same to the recording disk (Recorder.FailWrites, Recorder.FailFlushes).
//
// # What it cannot see
//
// The log is in the order the server receives requests: a write the
// filesystem issued before a flush, but which had not completed when the
// flush was issued, is taken as covered by the flush if the loop driver
// delivered it first (it processes its queue in order), so a program that
// calls fdatasync while its own write is still in flight is not caught.
// The filesystem's own writes at mount time are not replayed (ext4's
// superblock, torn at 512 bytes, leaves a filesystem that does not mount,
// whatever the program did), and a torn state whose filesystem does not
// mount is counted apart (ErrUnmountable). Crash states are random samples
// where there are more than Config.States; the seed (Report.Seed, SeedEnv)
// chooses them, but the recording itself depends on timing.
//
// It needs root, /dev/fuse, loop devices and the filesystem's mkfs;
// Available says what is missing. Everything it mounts and attaches is
// undone when Run returns, and by a shell it leaves behind if the process
// dies first (a test timeout, a signal).
package crashtest
