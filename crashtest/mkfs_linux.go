package crashtest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// FS names a filesystem the harness makes on its disk.
type FS string

const (
	// Ext4 is ext4 on a disk of 512-byte sectors, journalled
	// (data=ordered), its inode tables and journal written at mkfs.
	Ext4 FS = "ext4"
	// XFS is xfs on a disk of 4 KiB sectors with reflink on, which
	// gives untorn writes (direct.File.WriteAtomicAt) of 4 KiB to 1 MiB.
	XFS FS = "xfs"
)

// Sector returns the logical sector size of the disk the harness makes
// fs on: the unit a torn write is cut at.
func (f FS) Sector() int {
	if f == XFS {
		return 4096
	}
	return 512
}

func (f FS) mkfs(img string) *exec.Cmd {
	switch f {
	case Ext4:
		// lazy init off: ext4lazyinit would write the inode tables
		// in the background, into the recording.
		return exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", "-E",
			"lazy_itable_init=0,lazy_journal_init=0,nodiscard", img)
	case XFS:
		cmd := exec.Command("mkfs.xfs", "-q", "-f", "-K", "-s", "size=4096", "-m", "reflink=1", img)
		// mkfs.xfs refuses filesystems under 300 MB unless it is run
		// by xfstests, which these variables say.
		cmd.Env = append(os.Environ(), "TEST_DIR=1", "TEST_DEV=1", "QA_CHECK_FS=1")
		return cmd
	}
	return nil
}

// mountOptions are fs's mount options: copies of one xfs (crash states,
// disks made from the same image) are mounted at once, which xfs refuses
// without nouuid.
func (f FS) mountOptions() string {
	if f == XFS {
		return "nouuid"
	}
	return ""
}

// baseImages caches each filesystem's fresh image: its pages are never
// written, so every disk of a process shares them.
var baseImages sync.Map // baseKey → *baseImage

type baseKey struct {
	fs   FS
	size int64
}

type baseImage struct {
	once  sync.Once
	pages pages
	err   error
}

// freshImage returns the pages of a new filesystem of the given size, made
// by mkfs in a temporary file once per process.
func freshImage(f FS, size int64) (pages, error) {
	v, _ := baseImages.LoadOrStore(baseKey{f, size}, &baseImage{})
	b := v.(*baseImage)
	b.once.Do(func() { b.pages, b.err = makeImage(f, size) })
	return b.pages, b.err
}

func makeImage(f FS, size int64) (pages, error) {
	cmd := f.mkfs("")
	if cmd == nil {
		return nil, fmt.Errorf("%w: unknown filesystem %q", ErrInvalidConfig, f)
	}
	tmp, err := os.CreateTemp("", "dio-crashtest-*.img")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := tmp.Truncate(size); err != nil {
		return nil, err
	}
	cmd = f.mkfs(tmp.Name())
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("crashtest: %s: %w: %s", strings.Join(cmd.Args, " "), err, bytes.TrimSpace(out))
	}
	return readImage(tmp, size)
}

// readImage reads the first size bytes of f as pages, leaving out those
// that hold only zeros.
func readImage(f *os.File, size int64) (pages, error) {
	img := pages{}
	for i := int64(0); i < size/pageSize; i++ {
		p := new(page)
		if _, err := io.ReadFull(io.NewSectionReader(f, i*pageSize, pageSize), p[:]); err != nil {
			return nil, err
		}
		if *p != (page{}) {
			img[i] = p
		}
	}
	return img, nil
}
