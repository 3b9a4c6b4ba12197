//go:build !linux

package testenv

import "errors"

// The real node (containerd, runc, the kubelet with cgroupfs) is Linux's.

type cleanupPlan struct{ Dir, CgroupRoot, Bridge, NftTable, Network string }

func (n *RealNode) startJanitor() error { return errors.New("the real node runs on Linux only") }

func (n *RealNode) stopJanitor() error { return nil }

func stopPodSandboxes(string) error { return nil }

func forEachCgroupHierarchy(func(string) error) error { return nil }
