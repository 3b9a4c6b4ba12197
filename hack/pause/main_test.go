package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// The test binary runs as the pause process when this is set.
const childEnv = "GATEHOUSE_PAUSE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		pause(func() { fmt.Println("ready") }, func(sig os.Signal) { fmt.Println(sig) })
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestPauseSleepsUntilTerminated: a child's exit (SIGCHLD) does not end
// it; SIGTERM and SIGINT end it with status 0, as the
// CRI expects of a sandbox stopped in order.
func TestPauseSleepsUntilTerminated(t *testing.T) {
	for _, stop := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(stop.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=1")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out := bufio.NewReader(stdout)
			if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("pause said %q, %v", line, err)
			}
			// SIGCHLD is what a reaped orphan's exit sends: handled, and
			// the sandbox stays. Each signal is sent once the one
			// before was handled, so they arrive in this order.
			for _, sig := range []syscall.Signal{syscall.SIGCHLD, stop} {
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatalf("%v: %v", sig, err)
				}
				if line, err := out.ReadString('\n'); err != nil || line != sig.String()+"\n" {
					t.Fatalf("after %v pause said %q, %v", sig, line, err)
				}
			}
			if _, err := out.ReadString('\n'); err == nil {
				t.Error("pause handled another signal after the stop")
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("after %v: %v, want exit status 0", stop, err)
			}
		})
	}
}
