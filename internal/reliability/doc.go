// Package reliability holds dio's whole-system tests: load on a shared
// pool, a real full disk, and crashes with SIGKILL. It has no code of its
// own.
package reliability
