package crashtest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// keep writes a failing state's image and marks into dir and returns the
// image's path, or "" and err joined with why it could not.
func keep(dir string, f FS, j job, err error) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("%s-state%d.img", f, j.spec.index))
	if kerr := writeKept(path, j); kerr != nil {
		return "", errors.Join(err, fmt.Errorf("crashtest: keeping the state: %w", kerr))
	}
	return path, err
}

func writeKept(path string, j job) error {
	img, err := os.Create(path)
	if err != nil {
		return err
	}
	defer img.Close()
	if err := img.Truncate(j.img.size); err != nil {
		return err
	}
	if err := j.img.writeTo(img); err != nil {
		return err
	}
	if err := img.Close(); err != nil {
		return err
	}
	m, err := os.Create(path + ".marks")
	if err != nil {
		return err
	}
	defer m.Close()
	w := bufio.NewWriter(m)
	for _, p := range j.marks {
		w.Write(binary.AppendUvarint(nil, uint64(len(p))))
		w.Write(p)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return m.Close()
}

func readMarks(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var marks [][]byte
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, fmt.Errorf("crashtest: %s: %w", path, io.ErrUnexpectedEOF)
		}
		marks = append(marks, b[k:k+int(n)])
		b = b[k+int(n):]
	}
	return marks, nil
}

// Replay mounts a crash state kept by Config.KeepFailed (the image at path,
// its marks beside it) on a fresh loop device and hands it to check, as the
// run did: a regression test of a loss found once. The image file is not
// changed. The timeout bounds the mount and the check (0: DefaultTimeout).
func Replay(ctx context.Context, f FS, path string, timeout time.Duration, check func(context.Context, *State) error) error {
	if err := Available(f); err != nil {
		return err
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	marks, err := readMarks(path + ".marks")
	if err != nil {
		return err
	}
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return err
	}
	size := fi.Size() / pageSize * pageSize
	pg, err := readImage(file, size)
	if err != nil {
		return err
	}
	e, err := newEnv()
	if err != nil {
		return err
	}
	defer e.close()
	d, err := e.newMemDevice(f, size)
	if err != nil {
		return err
	}
	defer d.close()
	c := &Config{FS: f, Check: check, Timeout: timeout, DiskSize: size}
	j := job{spec: stateSpec{kind: "kept", torn: -1}, img: newImage(size, nil, pg), marks: marks}
	_, fail, _ := checkState(ctx, c, e, d, j, filepath.Base(path))
	if fail != nil {
		return fail
	}
	return nil
}

// writeEvents writes the recording as text, an event a line: its index,
// then "write OFF +LEN" (zeros: "zero OFF +LEN"), "flush N" or "mark"
// with the mark's bytes in hex.
func writeEvents(path string, ev []event) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	flushes := 0
	for i, e := range ev {
		switch e.kind {
		case evWrite:
			if e.data == nil {
				fmt.Fprintf(w, "%d zero %d +%d\n", i, e.off, e.n)
			} else {
				fmt.Fprintf(w, "%d write %d +%d\n", i, e.off, e.n)
			}
		case evFlush:
			flushes++
			fmt.Fprintf(w, "%d flush %d\n", i, flushes)
		case evMark:
			fmt.Fprintf(w, "%d mark %x\n", i, e.data)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}
