//go:build !race

package direct

// raceOn reports whether the race detector is on (it allocates).
const raceOn = false
