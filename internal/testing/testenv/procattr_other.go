//go:build !linux

package testenv

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// trampolineFor returns binary itself: the parent-death signal is Linux's.
func trampolineFor(_, binary string) (string, error) { return binary, nil }

func closeInheritedFiles() {}
