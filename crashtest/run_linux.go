package crashtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"
)

// Run records c.Workload on a fresh filesystem on the recording disk, then
// builds c.States crash states from the recording and hands each, mounted,
// to c.Check. The error is for a run that could not be made (ErrUnavailable
// where the machine lacks what it needs, a workload that failed); the
// states that broke a promise are in the Report (Report.Err).
func Run(ctx context.Context, c Config) (*Report, error) {
	if err := c.defaults(); err != nil {
		return nil, err
	}
	if err := Available(c.FS); err != nil {
		return nil, err
	}
	start := time.Now()
	base, err := freshImage(c.FS, c.DiskSize)
	if err != nil {
		return nil, err
	}
	e, err := newEnv()
	if err != nil {
		return nil, err
	}
	defer e.close()
	rep := &Report{FS: c.FS, Seed: c.Seed, Requested: c.States}

	rd, err := e.newDevice(c.FS, c.DiskSize)
	if err != nil {
		return nil, err
	}
	devs := []*device{rd}
	defer func() {
		for _, d := range devs {
			d.close()
		}
	}()
	events, base, err := record(ctx, &c, rd, base, rep)
	if err != nil {
		return rep, err
	}
	if c.KeepFailed != "" {
		if err := writeEvents(filepath.Join(c.KeepFailed, string(c.FS)+"-events.txt"), events); err != nil {
			return rep, err
		}
	}
	sector := int64(c.FS.Sector())
	rng := rand.New(rand.NewPCG(c.Seed, 0x6372617368))
	specs := planStates(events, c.States, sector, rng)

	// The states are checked on loop devices over tmpfs files: a read
	// there costs no round trip through this process.
	rd.close()
	devs = devs[:0]
	for len(devs) < c.Workers {
		d, err := e.newMemDevice(c.FS, c.DiskSize)
		if err != nil {
			return rep, err
		}
		devs = append(devs, d)
	}

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	jobs := make(chan job, len(devs))
	var mu sync.Mutex // guards rep's counts and failures
	go func() {
		defer close(jobs)
		buildStates(ctx, &c, events, base, specs, jobs, rep, &mu)
	}()
	var wg sync.WaitGroup
	for i := range devs {
		wg.Go(func() {
			for j := range jobs {
				d, f, t := checkState(ctx, &c, e, devs[i], j, fmt.Sprintf("%s %s", c.FS, j.spec.String()))
				devs[i] = d
				mu.Lock()
				rep.States++
				switch j.spec.kind {
				case KindFlush:
					rep.Flush++
				case KindSubset:
					rep.Subset++
				case KindTorn:
					rep.Torn++
				}
				rep.Build += t.build
				rep.Mount += t.mount
				rep.Check += t.check
				rep.Unmount += t.unmount
				if f != nil && j.spec.kind == KindTorn && errors.Is(f.Err, ErrUnmountable) && !errors.Is(f.Err, ErrHung) {
					// The filesystem's own metadata torn (see
					// ErrUnmountable): counted, not the
					// workload's failure.
					rep.TornUnmountable++
					if rep.FirstUnmountable == nil {
						rep.FirstUnmountable = f
					}
					f = nil
				}
				if f != nil {
					rep.FailedStates++
					if len(rep.Failures) < c.MaxFailures || c.MaxFailures < 0 {
						if c.KeepFailed != "" {
							f.Image, f.Err = keep(c.KeepFailed, c.FS, j, f.Err)
						}
						rep.Failures = append(rep.Failures, *f)
					}
					if c.MaxFailures > 0 && rep.FailedStates >= c.MaxFailures {
						stop()
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rep.Wall = time.Since(start)
	if err := context.Cause(ctx); err != nil && rep.FailedStates < c.MaxFailures && !errors.Is(err, context.Canceled) {
		return rep, err
	}
	return rep, nil
}

// record mounts a fresh filesystem (base) on d, runs the workload on it
// and returns what the disk saw from the mount on, and the disk as the
// mount left it, which the recording starts from. (The mount's own writes,
// ext4's superblock among them, are not replayed: torn at 512 bytes,
// ext4's would leave a filesystem that does not mount, whatever the
// workload did.)
func record(ctx context.Context, c *Config, d *device, base pages, rep *Report) ([]event, pages, error) {
	if err := d.serve(newImage(c.DiskSize, base, nil)); err != nil {
		return nil, nil, err
	}
	t := time.Now()
	if err := d.mount(c.FS.mountOptions()); err != nil {
		return nil, nil, err
	}
	rec, mounted := d.disk.startRecording()
	werr := c.Workload(ctx, &Recorder{Dir: d.mnt, FS: c.FS, Seed: c.Seed, rec: rec, dev: d})
	d.disk.stopRecording()
	d.disk.mu.Lock()
	d.disk.faults = faults{}
	d.disk.mu.Unlock()
	rep.Record = time.Since(t)
	if err := d.unmount(); err != nil && werr == nil {
		werr = err
	}
	if werr != nil {
		return nil, nil, fmt.Errorf("crashtest: the workload on %s: %w", c.FS, werr)
	}
	events := rec.snapshot()
	for _, e := range events {
		switch e.kind {
		case evWrite:
			rep.Writes++
			rep.WrittenBytes += int64(e.n)
		case evFlush:
			rep.Flushes++
		case evMark:
			rep.Marks++
		}
	}
	return events, mounted, nil
}

// A job is a crash state built and ready to be checked.
type job struct {
	spec  stateSpec
	img   *image // as the mount found it; the check writes to a copy
	marks [][]byte
}

// buildStates replays the recording once, in order, and sends each state's
// image to jobs as its interval is reached.
func buildStates(ctx context.Context, c *Config, ev []event, base pages, specs []stateSpec, jobs chan<- job, rep *Report, mu *sync.Mutex) {
	iv := intervals(ev)
	r := &replay{base: base, cur: pages{}}
	next := 0 // the next event the replay applies
	cur := -1 // the interval whose snapshot mid is
	var mid pages
	sector := int64(c.FS.Sector())
	for _, s := range specs {
		t := time.Now()
		v := iv[s.interval]
		if s.interval != cur {
			for ; next < v.start; next++ {
				if e := ev[next]; e.kind == evWrite {
					r.apply(e.data, e.n, e.off)
				}
			}
			mid, cur = r.snapshot(), s.interval
		}
		img := newImage(c.DiskSize, base, mid)
		for _, w := range s.writes {
			e := ev[w]
			img.writeAt(e.data, e.n, e.off)
		}
		if s.torn >= 0 {
			e := ev[s.torn]
			for _, k := range s.sectors {
				lo := int64(k) * sector
				n := min(sector, int64(e.n)-lo)
				var p []byte
				if e.data != nil {
					p = e.data[lo : lo+n]
				}
				img.writeAt(p, int(n), e.off+lo)
			}
		}
		j := job{spec: s, img: img, marks: marksBefore(ev, v.end)}
		mu.Lock()
		rep.Build += time.Since(t)
		mu.Unlock()
		select {
		case jobs <- j:
		case <-ctx.Done():
			return
		}
	}
}

// stateTimes is where one state's time went.
type stateTimes struct {
	build, mount, check, unmount time.Duration
}

// settle is how long a state that timed out gets, once its disk fails
// every request, to give up.
const settle = 10 * time.Second

// checkState mounts j's image on d and runs the checker. It returns the
// device to use next (a new one if d could not be freed after a hang) and
// the state's failure, if any.
func checkState(ctx context.Context, c *Config, e *env, d *device, j job, name string) (*device, *Failure, stateTimes) {
	var t stateTimes
	fail := func(err error) *Failure { return &Failure{State: name, Err: err} }
	tb := time.Now()
	if err := d.serve(j.img.fork()); err != nil {
		return d, fail(err), t
	}
	t0 := time.Now()
	t.build = t0.Sub(tb)
	if err := bounded(c.Timeout, d, func() error { return d.mount(c.FS.mountOptions()) }); err != nil {
		t.mount = time.Since(t0)
		return d, fail(fmt.Errorf("%w: %w", ErrUnmountable, err)), t
	}
	t1 := time.Now()
	t.mount = t1.Sub(t0)
	st := &State{Dir: d.mnt, FS: c.FS, Marks: j.marks, Kind: j.spec.kind, Seed: c.Seed, Name: name}
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	err := bounded(c.Timeout, d, func() error { return c.Check(cctx, st) })
	cancel()
	t2 := time.Now()
	t.check = t2.Sub(t1)
	var f *Failure
	if err != nil {
		f = fail(err)
	}
	if uerr := d.unmount(); uerr != nil {
		if f == nil {
			f = fail(fmt.Errorf("unmounting after the check: %w", uerr))
		}
		// The device may still be held (a checker that never
		// returned): give it up, take a new one.
		d.close()
		if nd, err := e.newMemDevice(c.FS, c.DiskSize); err == nil {
			d = nd
		}
	}
	t.unmount = time.Since(t2)
	return d, f, t
}

// ErrUnmountable is the error of a state whose filesystem does not mount.
// A torn state may leave one (ext4's superblock and jbd2's are 1 KiB
// writes, which a disk of 512-byte sectors can tear, and their checksums
// then fail): nothing a program on the filesystem does can cause that, so
// Run counts such states in Report.TornUnmountable rather than as
// failures. Any other state that does not mount is a failure.
var ErrUnmountable = errors.New("crashtest: the crash state does not mount")

// ErrHung is the error of a state whose mount or check did not finish in
// time.
var ErrHung = errors.New("crashtest: hung")

// bounded runs fn and waits for it at most timeout; past that the disk
// fails every request from then on (so that a mount or a read waiting on it
// returns), and bounded waits settle more before it gives up on fn.
func bounded(timeout time.Duration, d *device, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	}
	d.kill()
	select {
	case err := <-done:
		return fmt.Errorf("%w: not done after %v (then returned %v once the disk failed every request)", ErrHung, timeout, err)
	case <-time.After(settle):
		return fmt.Errorf("%w: not done after %v, nor %v after the disk failed every request", ErrHung, timeout, settle)
	}
}
