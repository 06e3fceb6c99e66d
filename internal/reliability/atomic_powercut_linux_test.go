package reliability

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/testenv"
)

// The stream of TestAtomicPowerCut: units of 64 KiB (the issue's),
// overwritten by writers goroutines, each on units of its own.
const (
	cutUnit    = 64 << 10
	cutUnits   = 64
	cutWriters = 4
	cutRounds  = 4 // power cuts per kind of write; DIO_CUT_ROUNDS overrides it
	cutSector  = 512
)

// cutPattern fills p with unit u's generation g: every 512-byte sector
// starts with (u, g) and is filled with a byte of g, so that a torn unit
// shows as sectors of different generations.
func cutPattern(p []byte, u, g int) {
	for s := 0; s < len(p); s += cutSector {
		sec := p[s : s+cutSector]
		for j := range sec {
			sec[j] = byte(g*13 + u + 1)
		}
		binary.LittleEndian.PutUint32(sec, uint32(u))
		binary.LittleEndian.PutUint32(sec[4:], uint32(g))
	}
}

// cutTorn reports whether p, unit u read back after the cut, is not one
// whole generation of it.
func cutTorn(p []byte, u int) bool {
	g := int(binary.LittleEndian.Uint32(p[4:]))
	want := make([]byte, len(p))
	cutPattern(want, u, g)
	return string(want) != string(p)
}

// TestAtomicPowerCut cuts the power (an xfs shutdown that drops the
// unwritten journal, as TestPowerCut) during a stream of overwrites of
// 64 KiB units with distinct patterns, remounts, and reads every unit:
// with WriteAtomicAt (RWF_ATOMIC) every unit must hold one whole pattern.
// The same stream with plain WriteAt is run for comparison and the torn
// units it leaves are reported, not failed: tearing needs a write cut
// between its sectors, which a loop device rarely does.
func TestAtomicPowerCut(t *testing.T) {
	if fs := testenv.FS(); fs != "" && fs != "xfs" {
		t.Skip("runs in the default and xfs legs, on an xfs of its own")
	}
	mnt, dev := loopDev(t, "xfs", 320<<20)
	path := filepath.Join(mnt, "units")
	f, err := direct.Open(path, os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	lim := f.AtomicWrite()
	f.Close()
	t.Logf("xfs untorn writes %+v", lim)
	if !lim.Supported() {
		t.Skip("this xfs has no untorn writes (a kernel before 6.11, or mkfs.xfs without reflink)")
	}
	require.True(t, lim.Min <= cutUnit && cutUnit <= lim.Max, "64 KiB within %+v", lim)

	rounds := cutRounds
	if n, err := strconv.Atoi(os.Getenv("DIO_CUT_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for _, atomic := range []bool{true, false} {
		torn, written := 0, 0
		for round := range rounds {
			t1, w1 := cutRound(t, mnt, dev, path, atomic, round)
			torn += t1
			written += w1
		}
		kind := map[bool]string{true: "WriteAtomicAt (RWF_ATOMIC)", false: "WriteAt"}[atomic]
		t.Logf("%s: %d power cuts during %d overwrites of 64 KiB units: %d of %d units torn", kind, rounds, written, torn, rounds*cutUnits)
		if atomic {
			require.Zero(t, torn, "an untorn write tore")
		}
	}
}

// cutRound writes the units' first generation and Syncs, overwrites them
// from cutWriters goroutines until the power is cut a random while
// later, remounts, and returns how many units are torn and how many
// overwrites were made.
func cutRound(t *testing.T, mnt, dev, path string, atomic bool, round int) (torn, written int) {
	f, err := direct.Open(path, os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	buf, err := aligned.New(cutWriters*cutUnit, f.Alignment().Memory)
	require.NoError(t, err)
	defer buf.Free()
	write := f.WriteAt
	if atomic {
		write = f.WriteAtomicAt
	}
	p := buf.Bytes()[:cutUnit]
	for u := range cutUnits {
		cutPattern(p, u, round*1000)
		_, err := write(p, int64(u)*cutUnit)
		require.NoError(t, err)
	}
	require.NoError(t, f.Sync())

	var wg sync.WaitGroup
	var mu sync.Mutex
	for k := range cutWriters {
		wg.Go(func() {
			p := buf.Bytes()[k*cutUnit : (k+1)*cutUnit]
			for g := round*1000 + 1; ; g++ {
				for u := k; u < cutUnits; u += cutWriters {
					cutPattern(p, u, g)
					if _, err := write(p, int64(u)*cutUnit); err != nil {
						// The shutdown: EIO from here on.
						if !errors.Is(err, unix.EIO) {
							t.Errorf("unit %d: %v", u, err)
						}
						return
					}
					mu.Lock()
					written++
					mu.Unlock()
				}
			}
		})
	}
	time.Sleep(time.Duration(20+rand.IntN(100)) * time.Millisecond)
	d, err := os.Open(mnt)
	require.NoError(t, err)
	err = unix.IoctlSetPointerInt(int(d.Fd()), xfsIocGoingDown, goingDownNoLogFlush)
	d.Close()
	require.NoError(t, err, "shutdown")
	wg.Wait()
	f.Close()
	require.NoError(t, unix.Unmount(mnt, 0))
	require.NoError(t, unix.Mount(dev, mnt, "xfs", 0, ""))

	f, err = direct.Open(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	for u := range cutUnits {
		_, err := f.ReadAt(p, int64(u)*cutUnit)
		require.NoError(t, err)
		if cutTorn(p, u) {
			torn++
		}
	}
	return torn, written
}
