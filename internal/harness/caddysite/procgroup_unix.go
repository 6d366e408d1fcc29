//go:build unix

package caddysite

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup makes cmd start a process group of its own, so that
// killGroup reaches whatever it starts.
func ownProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills cmd's process and its group.
func killGroup(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // it may be gone
}
