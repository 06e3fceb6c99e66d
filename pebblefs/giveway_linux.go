package pebblefs

// watchMemory starts giving way to the memory cgroup's pressure, when
// this process is in one whose limit is below the machine's memory.
func (c *freshFiles) watchMemory() {
	if c == nil {
		return
	}
	m, total := findMemoryCgroup(), memTotal()
	if m == nil || total > 0 && m.limit >= total {
		return
	}
	c.watch(memorySource{workingSet: m.workingSet, limit: m.limit, notify: m.notifyAbove, release: m.close}, memoryCheckEvery)
}
