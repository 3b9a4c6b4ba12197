// Command pause is the sandbox ("pause") container of a Pod on the local
// real node: containerd's CRI starts it first, to hold the Pod's
// namespaces, and stops it last. No registry is reachable here, so the
// node cannot pull the usual registry.k8s.io/pause; this is the same idea
// in a few lines of Go, built static (CGO_ENABLED=0) into an image of one
// file by hack/image (make pause-image).
//
// It sleeps until SIGTERM or SIGINT and exits 0. As PID 1 of a Pod that
// shares its process namespace it is also the parent of orphaned
// processes, so it reaps them on SIGCHLD, as the upstream pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	pause(nil, nil)
	os.Exit(0)
}

// pause returns on SIGTERM or SIGINT. Tests see when the signals are
// caught (ready) and each signal handled (handled).
func pause(ready func(), handled func(os.Signal)) {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	if ready != nil {
		ready()
	}
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reap()
		}
		if handled != nil {
			handled(sig)
		}
		if sig != syscall.SIGCHLD {
			return
		}
	}
}

// reap collects every exited child without blocking: one SIGCHLD may
// stand for several exits.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
