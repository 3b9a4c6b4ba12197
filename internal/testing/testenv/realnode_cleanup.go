//go:build linux

package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cleanupPlan names everything the real node creates outside the
// processes the harness starts itself: containerd's shims and the
// containers (which outlive containerd by design), the mounts, the Pod
// cgroups, the bridge and the nftables table.
type cleanupPlan struct {
	Dir        string
	CgroupRoot string
	Bridge     string
	NftTable   string
	Network    string
}

const cniResultsDir = "/var/lib/cni/results"

// janitorEnv carries the plan to the janitor process: the harness's own
// binary started again, recognised in init below.
const janitorEnv = "GATEHOUSE_TESTENV_JANITOR"

func init() {
	spec := os.Getenv(janitorEnv)
	if spec == "" {
		return
	}
	var plan cleanupPlan
	if err := json.Unmarshal([]byte(spec), &plan); err != nil {
		fmt.Fprintln(os.Stderr, "testenv janitor:", err)
		os.Exit(2)
	}
	// Stdin is a pipe whose other end only the harness holds: EOF means
	// the harness closed it (Stop) or died, SIGKILL included.
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := plan.sweep(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv janitor:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startJanitor starts the process that removes what the real node left
// once the harness stops or dies. The parent-death signal that ends
// containerd and the kubelet with the harness cannot reach the shims
// (containerd re-parents them) nor undo mounts, cgroups or the bridge.
func (n *RealNode) startJanitor() error {
	spec, err := json.Marshal(n.plan)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	log, err := os.Create(filepath.Join(filepath.Dir(n.Dir), "real-node-janitor.log"))
	if err != nil {
		w.Close()
		return err
	}
	defer log.Close()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), janitorEnv+"="+string(spec))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, log, log
	// Its own process group and no parent-death signal: it must outlive
	// the harness. closeInheritedFiles keeps the lock descriptors out.
	closeInheritedFiles()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start the real node's janitor: %w", err)
	}
	n.janitor, n.janitorIn = cmd, w
	return nil
}

// stopJanitor closes the janitor's pipe and waits for its sweep.
func (n *RealNode) stopJanitor() error {
	if n.janitor == nil {
		return nil
	}
	n.janitorIn.Close()
	done := make(chan error, 1)
	go func() { done <- n.janitor.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("real node cleanup: %w (log %s)", err, filepath.Join(filepath.Dir(n.Dir), "real-node-janitor.log"))
		}
		return nil
	case <-time.After(2 * time.Minute):
		return errors.New("real node cleanup did not finish within 2 minutes")
	}
}

// stopPodSandboxes stops and removes every Pod sandbox through the CRI, as
// the kubelet would: containers killed, the CNI DEL run (addresses
// released, veth removed), the sandbox's mounts undone.
func stopPodSandboxes(address string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("CRI ListPodSandbox: %w", err)
	}
	var errs []error
	for _, s := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("CRI StopPodSandbox %s: %w", s.Id, err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("CRI RemovePodSandbox %s: %w", s.Id, err))
		}
	}
	return errors.Join(errs...)
}

// sweep removes whatever of the plan is still there; every step tolerates
// what an orderly stop already removed.
func (p cleanupPlan) sweep() error {
	var errs []error
	if p.Dir == "" || p.CgroupRoot == "" {
		return errors.New("empty cleanup plan")
	}
	// Processes: containerd and the kubelet (named by paths under Dir on
	// their command lines), the shims (-address Dir/containerd.sock) and
	// every process in the Pods' cgroups.
	for range 50 {
		if killed := p.killProcesses(); killed == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	errs = append(errs, p.unmount())
	errs = append(errs, p.removeCgroups())
	if err := exec.Command("ip", "link", "show", p.Bridge).Run(); err == nil {
		if out, err := exec.Command("ip", "link", "delete", p.Bridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %w: %s", p.Bridge, err, out))
		}
	}
	if err := exec.Command("nft", "list", "table", "ip", p.NftTable).Run(); err == nil {
		if out, err := exec.Command("nft", "delete", "table", "ip", p.NftTable).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete nftables table %s: %w: %s", p.NftTable, err, out))
		}
	}
	// libcni caches each attachment's result under /var/lib/cni/results,
	// named by network and container (the bridge's and CRI's loopback);
	// containerd 1.6 offers no other place.
	cached, _ := filepath.Glob(filepath.Join(cniResultsDir, p.Network+"-*"))
	sandboxes, _ := os.ReadDir(filepath.Join(p.Dir, "containerd-root", "io.containerd.grpc.v1.cri", "sandboxes"))
	for _, s := range sandboxes {
		cached = append(cached, filepath.Join(cniResultsDir, "cni-loopback-"+s.Name()+"-lo"))
	}
	for _, f := range cached {
		_ = os.Remove(f)
	}
	if err := os.RemoveAll(p.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killProcesses sends SIGKILL to the node's processes still alive and
// returns how many it found.
func (p cleanupPlan) killProcesses() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	found := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if p.owns(pid) {
			found++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return found
}

func (p cleanupPlan) owns(pid int) bool {
	return p.ownsIn("/proc/" + strconv.Itoa(pid))
}

// ownsIn reads a process's command line and cgroups from its /proc dir.
func (p cleanupPlan) ownsIn(proc string) bool {
	if cmdline, err := os.ReadFile(proc + "/cmdline"); err == nil && strings.Contains(string(cmdline), p.Dir+"/") {
		return true
	}
	cgroups, err := os.ReadFile(proc + "/cgroup")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(cgroups), "\n") {
		// "hierarchy-ID:controllers:/path"
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 {
			if path := parts[2]; path == p.CgroupRoot || strings.HasPrefix(path, p.CgroupRoot+"/") {
				return true
			}
		}
	}
	return false
}

// unmount detaches every mount under Dir, deepest first: the kubelet's
// volumes and its root dir's own bind mount, the containers' rootfs, the
// sandboxes' shm and network namespaces.
func (p cleanupPlan) unmount() error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		point := unescapeMountPath(fields[4])
		if point == p.Dir || strings.HasPrefix(point, p.Dir+"/") {
			points = append(points, point)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, point := range points {
		if err := unix.Unmount(point, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", point, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountPath undoes mountinfo's octal escapes (space, tab, newline,
// backslash).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// removeCgroups removes the node's cgroup root in every hierarchy, the
// deepest directories first (a cgroup goes only once it has no children
// and no processes).
func (p cleanupPlan) removeCgroups() error {
	var errs []error
	_ = forEachCgroupHierarchy(func(hierarchy string) error {
		root := filepath.Join(hierarchy, p.CgroupRoot)
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for range 20 {
				if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
		return nil
	})
	return errors.Join(errs...)
}

// forEachCgroupHierarchy calls f with each mounted cgroup v1 hierarchy
// (/sys/fs/cgroup/cpu, memory, ..., and the named systemd one) and the
// unified one.
func forEachCgroupHierarchy(f func(hierarchy string) error) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		before, after, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fstype := strings.Fields(after)
		fields := strings.Fields(before)
		if len(fstype) == 0 || len(fields) < 5 || (fstype[0] != "cgroup" && fstype[0] != "cgroup2") {
			continue
		}
		if err := f(unescapeMountPath(fields[4])); err != nil {
			return err
		}
	}
	return nil
}
