package testenv

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DenyURing installs a seccomp filter on every thread of the process that
// makes io_uring_setup fail with EPERM, as container runtimes' default
// profiles do. It cannot be undone: call it in a child process.
func DenyURing() error {
	if runtime.GOARCH != "amd64" {
		return unix.ENOTSUP
	}
	const (
		auditArchX8664 = 0xc000003e
		offNr          = 0 // struct seccomp_data.nr
		offArch        = 4 // struct seccomp_data.arch
	)
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offArch},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: auditArchX8664},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offNr},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_IO_URING_SETUP},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return errno
	}
	return nil
}

// DropIPCLock removes CAP_IPC_LOCK from the calling thread's effective and
// permitted sets, so that pinned memory counts against RLIMIT_MEMLOCK as
// it does for an unprivileged process. Lock the goroutine to its thread
// first, and do the work that needs the lower privilege on it.
func DropIPCLock() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	const bit = unix.CAP_IPC_LOCK
	data[bit/32].Effective &^= 1 << (bit % 32)
	data[bit/32].Permitted &^= 1 << (bit % 32)
	return unix.Capset(&hdr, &data[0])
}
