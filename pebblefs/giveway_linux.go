package pebblefs

// watchMemory starts giving way to the memory cgroup's pressure, when
// this process is in one whose limit is below the machine's memory.
func (c *freshFiles) watchMemory() {
	if c == nil {
		return
	}
	m := findMemoryCgroup()
	if m == nil || (memTotal() > 0 && m.limit >= memTotal()) {
		return
	}
	c.watch(m.workingSet, m.limit, memoryCheckEvery)
}
