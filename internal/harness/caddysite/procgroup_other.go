//go:build !unix

package caddysite

import "os/exec"

// ownProcessGroup does nothing where there are no process groups.
func ownProcessGroup(*exec.Cmd) {}

// killGroup kills cmd's process.
func killGroup(cmd *exec.Cmd) {
	cmd.Process.Kill() //nolint:errcheck // it may be gone
}
