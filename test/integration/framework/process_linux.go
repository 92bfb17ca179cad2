package framework

import "syscall"

// childProcAttr puts each component in its own process group (so stop can signal the whole group) and asks the
// kernel to SIGKILL it if the thread that started it dies, which happens when the test binary exits for any reason,
// including a panic or `go test -timeout`, before stop ran.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
