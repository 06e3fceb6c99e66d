// Package benchkit is what dio-check and pebble-bench both measure with,
// written once: fio run and read (FioCmd, RunFio, ParseFio, a cgroup's
// fio included), the page cache a file holds (Resident, Residency) and
// dropping it (DropCache, Settle), the CPU a process and its children
// used (ProcessCPU, ChildCPU, io_uring's io-wq workers included), a
// latency Histogram that crosses processes as JSON, a co-tenant's hot
// file (WriteHot), and a loop device with ext4 on it (LoopDevice). The
// memory cgroups they run in are package cgroup's.
//
// It imports nothing of dio's: the library never measures itself with
// it, and the commands that do may be built without it being in scope.
package benchkit
