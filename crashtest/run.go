//go:build linux

package crashtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Environment variables that change a run's defaults.
const (
	// StatesEnv sets how many crash states a run checks when
	// Config.States is 0 (a long run: DIO_CRASH_STATES=100000).
	StatesEnv = "DIO_CRASH_STATES"
	// SeedEnv sets the seed when Config.Seed is 0.
	SeedEnv = "DIO_CRASH_SEED"
	// WorkersEnv sets Config.Workers when it is 0.
	WorkersEnv = "DIO_CRASH_WORKERS"
)

// ErrInvalidConfig is returned for a Config (or environment variable)
// that cannot make a run: no Workload or Check, an unknown filesystem, a
// disk size that is not a multiple of 4 KiB.
var ErrInvalidConfig = errors.New("crashtest: invalid configuration")

// Defaults.
const (
	DefaultStates   = 1000
	DefaultTimeout  = 30 * time.Second
	DefaultDiskSize = 64 << 20
	// DefaultWorkers is how many states are checked at once: a state's
	// mount waits on the loop driver's worker for each read, so more
	// than the cores keeps them busy.
	DefaultWorkers = 4
	// DefaultMaxFailures is how many failing states a run reports before
	// it stops looking.
	DefaultMaxFailures = 5
)

// Config describes a run: a workload recorded once on a fresh filesystem,
// then crash states of its disk checked one by one.
type Config struct {
	// FS is the filesystem made on the disk.
	FS FS
	// Workload writes on the filesystem mounted at r.Dir and calls
	// r.Mark each time it acknowledges something (a Sync returned, a
	// file was renamed and its directory synced), so that a checker
	// knows what a crash after that point must keep. It must be
	// deterministic enough for Check to know what it wrote (derive the
	// data from a seed, or keep it in memory: Check runs in the same
	// process, after Workload returned). An error from it ends the run.
	Workload func(ctx context.Context, r *Recorder) error
	// Check is handed each crash state, its filesystem mounted at s.Dir
	// (journal recovery done), with the marks made before the crash. It
	// returns an error if the state breaks a promise: an acknowledged
	// byte missing or changed, a record that was never written, a file
	// that cannot be reopened and written. It may write: each state is
	// a copy of its own.
	Check func(ctx context.Context, s *State) error

	// States is how many crash states to check; 0: DIO_CRASH_STATES,
	// else DefaultStates. Fewer are checked if the recording has no
	// more distinct ones.
	States int
	// Seed chooses the states (and is handed to Workload and Check);
	// 0: DIO_CRASH_SEED, else the time. Report.Seed says which.
	Seed uint64
	// Timeout bounds each state's mount and check; a state that takes
	// longer is reported as hung. 0: DefaultTimeout.
	Timeout time.Duration
	// Workers is how many states are mounted and checked at once, each
	// on a loop device of its own; 0: DIO_CRASH_WORKERS, else
	// DefaultWorkers.
	Workers int
	// DiskSize is the disk's size in bytes; 0: DefaultDiskSize.
	DiskSize int64
	// MaxFailures stops the run after that many failing states; 0:
	// DefaultMaxFailures, negative: no limit.
	MaxFailures int
	// KeepFailed, if set, is a directory where each reported failing
	// state is kept, as its image (a sparse file of DiskSize bytes, as
	// the disk was before the mount) and its marks: Replay checks it
	// again, and a test can keep it as a regression.
	KeepFailed string
}

// A Recorder is a workload's view of the recording disk.
type Recorder struct {
	// Dir is the filesystem's mount point.
	Dir string
	// FS is the filesystem.
	FS FS
	// Seed is the run's seed.
	Seed uint64
	rec  *recording
	dev  *device
}

// Mark records that the workload has acknowledged something, described by
// p (the checker's own encoding: a size, a record number, a name). A
// crash state comes with every mark made before its crash point: a state
// between two flushes with every mark made before the second flush, since
// a mark made there stands on writes flushed by the first. Mark is safe
// for concurrent use.
func (r *Recorder) Mark(p []byte) { r.rec.mark(p) }

// FailWrites makes the recording disk fail, with EIO, the next times writes
// that touch the sectors under bytes [off, off+n) of the file at path,
// which must be allocated (see Disk.FailWrites). The failed writes are not
// in the recording: the disk did not take them.
func (r *Recorder) FailWrites(path string, off, n int64, times int) error {
	_, err := r.dev.failWrites(path, off, n, times)
	return err
}

// FailFlushes makes the recording disk fail its next times flushes with
// EIO (see Disk.FailFlushes).
func (r *Recorder) FailFlushes(times int) { r.dev.failFlushes(times) }

// A State is one crash state, mounted for its check.
type State struct {
	// Dir is where the state's filesystem is mounted.
	Dir string
	// FS is the filesystem.
	FS FS
	// Marks are the marks made before the crash, in the order made.
	Marks [][]byte
	// Kind is KindFlush, KindSubset or KindTorn.
	Kind string
	// Seed is the run's seed.
	Seed uint64
	// Name says which state this is, to reproduce it.
	Name string
}

// Last returns the last mark, or nil.
func (s *State) Last() []byte {
	if len(s.Marks) == 0 {
		return nil
	}
	return s.Marks[len(s.Marks)-1]
}

// A Failure is a crash state that broke a promise, hung, or did not mount.
type Failure struct {
	// State names the state (its kind, flush, writes, torn sectors).
	State string
	// Err says what broke: the checker's error, a mount that failed,
	// a check that did not finish in time.
	Err error
	// Image is where the state was kept (Config.KeepFailed), or "".
	Image string
}

func (f Failure) Error() string { return f.State + ": " + f.Err.Error() }

// A Report says what a run recorded and checked, what failed, and where
// the time went.
type Report struct {
	FS   FS
	Seed uint64
	// The recording: writes and flushes the disk saw, marks made.
	Writes, Flushes, Marks int
	// WrittenBytes is what the writes carried.
	WrittenBytes int64
	// Requested is how many states the run was asked for; States how
	// many it checked (fewer when the recording has fewer distinct ones,
	// or when it stopped at MaxFailures), by kind.
	Requested           int
	States              int
	Flush, Subset, Torn int
	Failures            []Failure
	// FailedStates counts every failing state (Failures keeps the first
	// MaxFailures).
	FailedStates int
	// TornUnmountable counts the torn states whose filesystem did not
	// mount (see ErrUnmountable); FirstUnmountable is the first.
	TornUnmountable  int
	FirstUnmountable *Failure
	// Where the time went: the workload's recording; building states'
	// images; mounting them (journal recovery); the checks; unmounting.
	// Build, Mount, Check and Unmount are summed over the workers.
	Record, Build, Mount, Check, Unmount time.Duration
	// Wall is the whole run's time.
	Wall time.Duration
}

// Err returns the failures joined, or nil.
func (r *Report) Err() error {
	if r.FailedStates == 0 {
		return nil
	}
	errs := make([]error, 0, len(r.Failures)+1)
	for _, f := range r.Failures {
		errs = append(errs, f)
	}
	if more := r.FailedStates - len(r.Failures); more > 0 {
		errs = append(errs, fmt.Errorf("and %d more failing states", more))
	}
	return errors.Join(errs...)
}

// String summarises the run in a line.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s seed %d: %d writes (%d KiB), %d flushes, %d marks recorded in %v; %d states (%d flush, %d subset, %d torn) in %v, %.1f states/s",
		r.FS, r.Seed, r.Writes, r.WrittenBytes>>10, r.Flushes, r.Marks, r.Record.Round(time.Millisecond),
		r.States, r.Flush, r.Subset, r.Torn, r.Wall.Round(time.Millisecond), float64(r.States)/r.Wall.Seconds())
	if r.States > 0 {
		per := func(d time.Duration) time.Duration { return (d / time.Duration(r.States)).Round(10 * time.Microsecond) }
		fmt.Fprintf(&b, "; per state: build %v, mount %v, check %v, unmount %v", per(r.Build), per(r.Mount), per(r.Check), per(r.Unmount))
	}
	if r.TornUnmountable > 0 {
		fmt.Fprintf(&b, "; %d torn states did not mount (first: %v)", r.TornUnmountable, r.FirstUnmountable)
	}
	fmt.Fprintf(&b, "; %d failing", r.FailedStates)
	return b.String()
}

func (c *Config) defaults() error {
	if c.Workload == nil || c.Check == nil {
		return fmt.Errorf("%w: it needs a Workload and a Check", ErrInvalidConfig)
	}
	if c.States == 0 {
		c.States = DefaultStates
		if v := os.Getenv(StatesEnv); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("%w: %s=%q: want a positive number", ErrInvalidConfig, StatesEnv, v)
			}
			c.States = n
		}
	}
	if c.Seed == 0 {
		if v := os.Getenv(SeedEnv); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, SeedEnv, v, err)
			}
			c.Seed = n
		} else {
			c.Seed = uint64(time.Now().UnixNano())
		}
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
		if v := os.Getenv(WorkersEnv); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("%w: %s=%q: want a positive number", ErrInvalidConfig, WorkersEnv, v)
			}
			c.Workers = n
		}
	}
	if c.DiskSize == 0 {
		c.DiskSize = DefaultDiskSize
	}
	if c.DiskSize%pageSize != 0 {
		return fmt.Errorf("%w: DiskSize %d is not a multiple of %d", ErrInvalidConfig, c.DiskSize, pageSize)
	}
	if c.MaxFailures == 0 {
		c.MaxFailures = DefaultMaxFailures
	}
	return nil
}
