//go:build race

package blobio_test

// raceEnabled reports a -race build, whose sync.Pool drops a random share
// of what is put back (so that races on pooled objects show), which makes
// allocation counts of pooled paths meaningless.
const raceEnabled = true
