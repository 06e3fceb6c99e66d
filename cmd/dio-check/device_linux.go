//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ramDevice says, when dir lies on a block device backed by memory, what
// it is: a loop device over a file in tmpfs (the "fast device" of
// docs/engine.md, which completes asynchronously at memory speed, so
// that the CPU an I/O costs sets the pace) or a brd RAM disk. It returns
// "" for anything else, and where it cannot tell.
func ramDevice(dir string) string {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return ""
	}
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	if name, err := filepath.EvalSymlinks(sys); err == nil && strings.HasPrefix(filepath.Base(name), "ram") {
		return "RAM-backed device: brd " + filepath.Base(name)
	}
	b, err := os.ReadFile(filepath.Join(sys, "loop", "backing_file"))
	if err != nil {
		return ""
	}
	backing := strings.TrimSpace(string(b))
	var fs unix.Statfs_t
	if unix.Statfs(backing, &fs) != nil || fs.Type != unix.TMPFS_MAGIC {
		return ""
	}
	dio := "off"
	if d, err := os.ReadFile(filepath.Join(sys, "loop", "dio")); err == nil && strings.TrimSpace(string(d)) == "1" {
		dio = "on"
	}
	return fmt.Sprintf("RAM-backed device: a loop device over %s in tmpfs, direct I/O %s", backing, dio)
}
