//go:build !linux

package framework

import "syscall"

// childProcAttr puts each component in its own process group so stop can signal the whole group. Only Linux has a
// parent-death signal; elsewhere a test binary that crashes before stop can leave components running.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
