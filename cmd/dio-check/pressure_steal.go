package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// cpuTimes is the first line of /proc/stat: the time all CPUs spent so
// far, in clock ticks, and how much of it the hypervisor stole.
type cpuTimes struct {
	total, steal uint64
}

// parseCPUTimes reads the "cpu" line of /proc/stat: user, nice, system,
// idle, iowait, irq, softirq and steal add up to the total (guest time
// is counted within user already).
func parseCPUTimes(stat []byte) (cpuTimes, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: no cpu line with steal time: %q", line)
	}
	var t cpuTimes
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %w", err)
		}
		t.total += v
		if i == 7 {
			t.steal = v
		}
	}
	return t, nil
}

// stealPct returns the steal since earlier, in percent of all CPU time
// since then; 0 without a later total.
func (t cpuTimes) stealPct(earlier cpuTimes) float64 {
	if t.total <= earlier.total {
		return 0
	}
	return 100 * float64(t.steal-earlier.steal) / float64(t.total-earlier.total)
}
