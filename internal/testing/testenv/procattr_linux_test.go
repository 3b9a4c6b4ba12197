package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// orphanHelperEnv, when set, makes this test binary the harness process of
// TestChildrenDieWithTheHarness: it starts etcd the way StartControlPlane
// has envtest start it, with its data under the directory the variable
// names, says "started" and waits to be killed.
const orphanHelperEnv = "GATEHOUSE_TESTENV_ORPHAN_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(orphanHelperEnv); dir != "" {
		os.Exit(orphanHelper(dir))
	}
	os.Exit(m.Run())
}

func orphanHelper(dir string) int {
	root, err := RepoRoot()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	bin := filepath.Join(root, "bin")
	cp := &ControlPlane{Dir: dir, Env: &envtest.Environment{}, binaries: map[string]string{
		"etcd": filepath.Join(bin, "etcd"), "kube-apiserver": filepath.Join(bin, "kube-apiserver"),
	}}
	if err := cp.configureProcesses(); err != nil {
		fmt.Println(err)
		return 1
	}
	etcd := cp.Env.ControlPlane.Etcd
	etcd.DataDir = filepath.Join(dir, "etcd-data")
	etcd.StartTimeout = 2 * time.Minute
	if err := etcd.Start(); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("started")
	select {}
}

// TestChildrenDieWithTheHarness kills a harness process (SIGKILL, as a go
// test -timeout or an impatient user does) that started etcd through
// envtest while holding a descriptor it inherited (fd 3, as `flock LOCK go
// test` hands its lock on): etcd must die with it, and nothing may keep the
// descriptor open. Before, etcd and kube-apiserver were left running with
// ppid 1, holding the shared lock's descriptor, and every job waiting for
// the lock waited for them.
func TestChildrenDieWithTheHarness(t *testing.T) {
	dir := t.TempDir()
	inheritedR, inheritedW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inheritedR.Close()
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), orphanHelperEnv+"="+dir)
	helper.ExtraFiles = []*os.File{inheritedW}
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	inheritedW.Close()
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "started" {
		t.Fatalf("helper: %q, %v", line, err)
	}
	etcd := processWithArg(t, "--data-dir="+filepath.Join(dir, "etcd-data"))
	if etcd == 0 {
		t.Fatal("no etcd process with the helper's data directory")
	}
	t.Cleanup(func() { _ = syscall.Kill(etcd, syscall.SIGKILL) })
	pipe, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", inheritedR.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", etcd))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", etcd, fd.Name())); target == pipe {
			t.Errorf("etcd holds the harness's inherited descriptor (%s) as its fd %s", pipe, fd.Name())
		}
	}

	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()

	deadline := time.Now().Add(30 * time.Second)
	for alive(etcd) {
		if time.Now().After(deadline) {
			t.Fatalf("etcd %d still runs 30 s after its harness was killed (parent now %s)", etcd, parentOf(etcd))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every holder of the write end is gone: the read end sees EOF. A
	// descendant that inherited it would keep the pipe open.
	eof := make(chan error, 1)
	go func() { _, err := io.ReadAll(inheritedR); eof <- err }()
	select {
	case err := <-eof:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the descriptor the harness inherited is still held open 30 s after it was killed")
	}
}

// processWithArg returns the pid of a process with arg in its argv, or 0.
func processWithArg(t *testing.T, arg string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(raw, []byte{0}) {
			if string(a) == arg {
				return pid
			}
		}
	}
	return 0
}

// alive reports whether pid runs (not gone, not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}

func parentOf(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return err.Error()
	}
	i := bytes.LastIndexByte(stat, ')')
	if fields := strings.Fields(string(stat[i+1:])); len(fields) > 1 {
		return fields[1]
	}
	return "unknown"
}
