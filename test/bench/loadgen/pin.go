package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// pin restricts every thread of pid to cpu. Threads created later inherit
// the mask of the thread that creates them, so pinning all current threads
// pins the process. On a two-core machine the load generator gets one core
// and the server under test the other: neither steals the other's time,
// which makes the tail latencies of the two targets comparable.
func pin(pid, cpu int) error {
	if runtime.NumCPU() < 2 {
		return nil
	}
	var set unix.CPUSet
	set.Set(cpu)
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin thread %d of %d: %w", tid, pid, err)
		}
	}
	return nil
}
