package crashtest

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Disk is the recording disk without the replay: a disk held in memory,
// served through FUSE, a loop device on it and a fresh filesystem on that,
// mounted at Dir. Tests use it to make the disk fail under a real
// filesystem: sectors that fail every read until written again (as
// dm-dust's bad blocks do), a write or a flush that fails with EIO. The
// faults are set by file: the Disk finds the sectors under a file's bytes
// (FIEMAP) and fails requests there.
type Disk struct {
	env *env
	dev *device
}

// NewDisk makes a disk of size bytes (0: DefaultDiskSize), fs on it, and
// mounts it. It fails with ErrUnavailable where the machine cannot (see
// Available).
func NewDisk(f FS, size int64) (*Disk, error) {
	if err := Available(f); err != nil {
		return nil, err
	}
	if size == 0 {
		size = DefaultDiskSize
	}
	if size%pageSize != 0 {
		return nil, fmt.Errorf("%w: disk size %d is not a multiple of %d", ErrInvalidConfig, size, pageSize)
	}
	base, err := freshImage(f, size)
	if err != nil {
		return nil, err
	}
	e, err := newEnv()
	if err != nil {
		return nil, err
	}
	d := &Disk{env: e}
	if err := d.start(f, size, base); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *Disk) start(f FS, size int64, base pages) (err error) {
	if d.dev, err = d.env.newDevice(f, size); err != nil {
		return err
	}
	if err := d.dev.serve(newImage(size, base, nil)); err != nil {
		return err
	}
	return d.dev.mount(f.mountOptions())
}

// Dir returns where the filesystem is mounted.
func (d *Disk) Dir() string { return d.dev.mnt }

// FS returns the filesystem.
func (d *Disk) FS() FS { return d.dev.fs }

// Sector returns the disk's logical sector size: the unit it fails reads in.
func (d *Disk) Sector() int { return d.dev.fs.Sector() }

// Close unmounts the filesystem and removes the disk.
func (d *Disk) Close() error {
	var errs []error
	if d.dev != nil {
		errs = append(errs, d.dev.close())
	}
	errs = append(errs, d.env.close())
	return errors.Join(errs...)
}

// Remount unmounts the filesystem and mounts it again, so that what is
// read next comes from the disk, not from a cache, and a filesystem that
// shut itself down after an error is back.
func (d *Disk) Remount() error {
	if err := d.dev.unmount(); err != nil {
		return err
	}
	return d.dev.mount(d.dev.fs.mountOptions())
}

// Counts returns what the disk has served so far.
func (d *Disk) Counts() IOCounts { return d.dev.disk.counts() }

// A Span is a range of bytes on the disk.
type Span struct{ Off, Len int64 }

// FailReads makes the sectors under bytes [off, off+n) of the file at path
// fail every read with EIO until they are written again, and returns them
// (disk offsets, whole sectors). The range must be in the file's written
// extents.
func (d *Disk) FailReads(path string, off, n int64) ([]Span, error) {
	return d.dev.failReads(path, off, n)
}

// FailWrites makes the next times writes that touch the sectors under bytes
// [off, off+n) of the file at path fail with EIO, and returns the sectors.
// The range must be allocated (written, or preallocated with fallocate).
func (d *Disk) FailWrites(path string, off, n int64, times int) ([]Span, error) {
	return d.dev.failWrites(path, off, n, times)
}

// FailFlushes makes the disk's next times flushes fail with EIO. A flush
// that fails inside a journal commit stops the filesystem (ext4 aborts its
// journal and goes read-only, xfs shuts down) until it is mounted again.
func (d *Disk) FailFlushes(times int) { d.dev.failFlushes(times) }

// Heal drops every fault still planted.
func (d *Disk) Heal() {
	d.dev.disk.mu.Lock()
	d.dev.disk.faults = faults{}
	d.dev.disk.mu.Unlock()
}

func (d *device) failReads(path string, off, n int64) ([]Span, error) {
	spans, err := d.sectors(path, off, n, true)
	if err != nil {
		return nil, err
	}
	d.disk.mu.Lock()
	for _, s := range spans {
		d.disk.faults.bad = append(d.disk.faults.bad, span{s.Off, s.Len})
	}
	d.disk.mu.Unlock()
	return spans, nil
}

func (d *device) failWrites(path string, off, n int64, times int) ([]Span, error) {
	spans, err := d.sectors(path, off, n, false)
	if err != nil {
		return nil, err
	}
	d.disk.mu.Lock()
	d.disk.faults.writes = d.disk.faults.writes[:0]
	for _, s := range spans {
		d.disk.faults.writes = append(d.disk.faults.writes, span{s.Off, s.Len})
	}
	d.disk.faults.writeTimes = times
	d.disk.mu.Unlock()
	return spans, nil
}

func (d *device) failFlushes(times int) {
	d.disk.mu.Lock()
	d.disk.faults.flushTimes = times
	d.disk.mu.Unlock()
}

// sectors maps bytes [off, off+n) of the file at path to the disk's
// sectors under them, rounded out to whole sectors.
func (d *device) sectors(path string, off, n int64, written bool) ([]Span, error) {
	ext, err := fiemap(path)
	if err != nil {
		return nil, err
	}
	sec := int64(d.fs.Sector())
	lo, hi := off/sec*sec, (off+n+sec-1)/sec*sec
	var out []Span
	for at := lo; at < hi; {
		e, ok := extentAt(ext, at)
		if !ok {
			return nil, fmt.Errorf("crashtest: %s has no block at byte %d", path, at)
		}
		if written && e.flags&fiemapExtentUnwritten != 0 {
			return nil, fmt.Errorf("crashtest: %s's byte %d is preallocated, not written: reads there do not reach the disk", path, at)
		}
		end := min(hi, int64(e.logical+e.length))
		phys := int64(e.physical) + at - int64(e.logical)
		if k := len(out) - 1; k >= 0 && out[k].Off+out[k].Len == phys {
			out[k].Len += end - at
		} else {
			out = append(out, Span{phys, end - at})
		}
		at = end
	}
	return out, nil
}

// The kernel's struct fiemap_extent (linux/fiemap.h).
type fiemapExtent struct {
	logical, physical, length uint64
	_                         [2]uint64
	flags                     uint32
	_                         [3]uint32
}

const (
	fsIocFiemap           = 0xc020660b // _IOWR('f', 11, struct fiemap)
	fiemapFlagSync        = 0x1
	fiemapExtentLast      = 0x1
	fiemapExtentUnwritten = 0x800
	fiemapExtents         = 256 // per call
)

// fiemap returns the extents of the file at path (FS_IOC_FIEMAP, after
// writing back what is cached).
func fiemap(path string) ([]fiemapExtent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []fiemapExtent
	var start uint64
	for {
		// struct fiemap: start, length, flags, mapped, count, reserved,
		// then the extents.
		buf := make([]uint64, 4+fiemapExtents*int(unsafe.Sizeof(fiemapExtent{}))/8)
		buf[0], buf[1] = start, ^uint64(0)-start
		hdr := (*[8]uint32)(unsafe.Pointer(&buf[0]))
		hdr[4] = fiemapFlagSync
		hdr[6] = fiemapExtents
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0]))); errno != 0 {
			return nil, fmt.Errorf("crashtest: FIEMAP %s: %w", path, errno)
		}
		mapped := hdr[5]
		ext := unsafe.Slice((*fiemapExtent)(unsafe.Pointer(&buf[4])), fiemapExtents)[:mapped]
		out = append(out, ext...)
		if mapped == 0 || ext[mapped-1].flags&fiemapExtentLast != 0 {
			return out, nil
		}
		last := ext[mapped-1]
		start = last.logical + last.length
	}
}

func extentAt(ext []fiemapExtent, off int64) (fiemapExtent, bool) {
	for _, e := range ext {
		if uint64(off) >= e.logical && uint64(off) < e.logical+e.length {
			return e, true
		}
	}
	return fiemapExtent{}, false
}
