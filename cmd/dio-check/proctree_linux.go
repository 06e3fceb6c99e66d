package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// killTree kills p and every process descended from it, children first
// found, then killed, so that none is reparented out of reach: fio runs
// its jobs in processes it forks (each in a session of its own), which
// outlive a SIGKILL to fio alone. It returns the descendants' pids.
func killTree(p *os.Process) []int {
	var all []int
	for next := []int{p.Pid}; len(next) > 0; {
		kids := children(next)
		all = append(all, kids...)
		next = kids
	}
	p.Kill()
	for _, pid := range all {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return all
}

// children returns the live processes whose parent is one of parents,
// from /proc/PID/stat, where the state and the parent follow the command
// name in parentheses.
func children(parents []int) []int {
	var kids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		stat, err := os.ReadFile(path)
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 {
			continue // gone meanwhile
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 2 || f[0][0] == 'Z' {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		for _, parent := range parents {
			if ppid == parent {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
				kids = append(kids, pid)
			}
		}
	}
	return kids
}
