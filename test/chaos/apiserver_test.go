package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/testing/devenv"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// TestAPIServerRestart: kube-apiserver is killed, stays down 20 s, and is
// started again with the same command line on the same etcd (its
// certificates and client CA are files, so every client's credentials stay
// valid). Gatehouse must stay live and ready throughout (it serves from
// caches, and marking itself unready would only slow the recovery: the API
// server that would call it is the one that is down), its informers must
// resume, and the first decisions after the recovery must see the state as
// the API server now has it.
func TestAPIServerRestart(t *testing.T) {
	ctx := context.Background()
	env, _ := startPVSafe(t, true)
	c := env.ControlPlane.Client

	volume := func(name string, policy corev1.PersistentVolumeReclaimPolicy) *corev1.PersistentVolume {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: policy,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}},
			},
		}
		if err := c.Create(ctx, pv); err != nil {
			t.Fatal(err)
		}
		return pv
	}
	// An Available volume that would delete its data is refused.
	kept := volume("kept", corev1.PersistentVolumeReclaimDelete)
	waitFor(t, "pvsafe refuses deleting an Available Delete volume", func() error {
		err := c.Delete(ctx, kept.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "DELETION BLOCKED") {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})

	cmd := killAPIServer(t, env)
	down := time.Now()
	var notReady, notLive int
	for time.Since(down) < 20*time.Second {
		if code := get(env, "/healthz"); code != http.StatusOK {
			notLive++
		}
		if code := get(env, "/readyz"); code != http.StatusOK {
			notReady++
		}
		time.Sleep(500 * time.Millisecond)
	}
	startAPIServer(t, env, cmd)
	recovered := time.Since(down)

	// The first decisions after the recovery: a volume made Retain after
	// the restart may go; a new Delete volume may not.
	patched := kept.DeepCopy()
	if err := c.Get(ctx, client.ObjectKeyFromObject(kept), patched); err != nil {
		t.Fatal(err)
	}
	patched.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	if err := c.Update(ctx, patched); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, patched); err != nil {
		t.Fatalf("deleting a volume made Retain after the restart: %v", err)
	}
	fresh := volume("fresh", corev1.PersistentVolumeReclaimDelete)
	// A volume is Pending (and may go) until the volume controller, itself
	// reconnecting, marks it Available.
	waitFor(t, "pvsafe refuses deleting a Delete volume made after the restart", func() error {
		err := c.Delete(ctx, fresh.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "DELETION BLOCKED") {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
	t.Logf("API server down 20 s, answering again %v after the kill; Gatehouse /healthz failed %d times and /readyz %d times during the outage",
		recovered.Round(time.Millisecond), notLive, notReady)
	if notLive > 0 || notReady > 0 {
		t.Fatalf("Gatehouse was not live (%d) or not ready (%d) while the API server was down", notLive, notReady)
	}
}

// killAPIServer kills env's kube-apiserver with SIGKILL and returns what
// startAPIServer needs to start it again.
func killAPIServer(t *testing.T, env *devenv.Env) *process {
	t.Helper()
	p, err := apiServerProcess(env)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// SIGKILL is delivered asynchronously, and a process's threads exit
	// one by one: its main thread may already be a zombie while the others
	// still hold its descriptors, its listening socket among them. A new
	// kube-apiserver started on the same command line before they are
	// gone fails to bind ("bind: address already in use", seen under load
	// as a restarted API server that never answered). So wait until every
	// thread has exited, and until the port can be bound.
	port, err := strconv.Atoi(argValue(p.argv, "--secure-port"))
	if err != nil {
		t.Fatalf("kube-apiserver's --secure-port: %v", err)
	}
	killed := time.Now()
	deadline := killed.Add(30 * time.Second)
	var zombieWithThreads, portHeld int
	for {
		gone, threads := exited(p.pid)
		switch {
		case !gone && threads > 1 && processState(p.pid) == 'Z':
			zombieWithThreads++
		case gone:
			err := bindable(port)
			if err == nil {
				t.Logf("kube-apiserver %d gone and its port free %v after SIGKILL (polls: %d with a zombie main thread and live threads, %d with the port still bound)",
					p.pid, time.Since(killed).Round(time.Millisecond), zombieWithThreads, portHeld)
				return p
			}
			portHeld++
			if time.Now().After(deadline) {
				t.Fatalf("port %d still taken 30 s after kube-apiserver %d exited: %v", port, p.pid, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver %d still running 30 s after SIGKILL (%d threads)", p.pid, threads)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exited reports whether every thread of pid has exited (the process is
// gone, or a zombie with no thread left but its main one), and how many
// threads it still has.
func exited(pid int) (bool, int) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true, 0
	}
	state := processState(pid)
	return len(tasks) <= 1 && (state == 'Z' || state == 'X' || state == 0), len(tasks)
}

// processState is the state letter of /proc/<pid>/stat, 0 if it is gone.
func processState(pid int) byte {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// bindable binds 127.0.0.1:port (SO_REUSEADDR, as Go's listeners, so that
// connections in TIME_WAIT do not count) without listening, and releases
// it: nil means kube-apiserver can bind it now.
func bindable(port int) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return err
	}
	return syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// argValue is the value of the last --name=value in argv.
func argValue(argv []string, name string) string {
	var v string
	for _, a := range argv {
		if rest, ok := strings.CutPrefix(a, name+"="); ok {
			v = rest
		}
	}
	return v
}

// startAPIServer starts p's command line again, with extra flags appended
// (a later flag wins), in the test's process group of children (killed
// with the test binary; see testenv.ProcAttr), and returns once its
// /readyz passes. Its log, kube-apiserver-restarted.log, sits with the
// control plane's and is kept when the test fails (logDir).
// It is stopped when the test ends, before the control plane's own cleanup.
func startAPIServer(t *testing.T, env *devenv.Env, p *process, extra ...string) {
	t.Helper()
	cmd := exec.Command(p.argv[0], append(p.argv[1:], extra...)...)
	cmd.Env, cmd.Dir = p.env, p.dir
	cmd.SysProcAttr = testenv.ProcAttr()
	log, err := os.Create(filepath.Join(env.ControlPlane.Dir, "kube-apiserver-restarted.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// kube-apiserver drains its watches on SIGTERM for up to a minute;
		// the test is over, so it gets 5 s and then SIGKILL.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		log.Close()
		if t.Failed() {
			t.Logf("the restarted kube-apiserver's log ends:\n%s", tail(log.Name(), 60))
		}
	})
	if err := waitAPIServerReady(env, exited, apiServerStartTimeout); err != nil {
		t.Fatalf("the restarted kube-apiserver: %v", err)
	}
	t.Logf("the restarted kube-apiserver was ready %v after its start", time.Since(started).Round(time.Millisecond))
}

// apiServerStartTimeout bounds a restarted kube-apiserver's start as
// testenv's ControlPlaneStartTimeout bounds the first. Measured beside two
// busy loops on two cores, kill to /readyz took about 3 s
// (docs/reliability.md, "Fault tests on a loaded machine"); the bound only
// turns a start that never completes into a failure with the log.
const apiServerStartTimeout = 2 * time.Minute

// waitAPIServerReady polls env's kube-apiserver's /readyz with the test's
// own credentials until it passes, the process exits (exited closes) or the
// timeout passes.
func waitAPIServerReady(env *devenv.Env, exited <-chan struct{}, timeout time.Duration) error {
	httpClient, err := rest.HTTPClientFor(env.ControlPlane.Config)
	if err != nil {
		return err
	}
	httpClient.Timeout = 5 * time.Second
	readyz, err := url.Parse(env.ControlPlane.Config.Host)
	if err != nil {
		return err
	}
	readyz.Path = "/readyz" // envtest's Host ends with a slash
	deadline := time.After(timeout)
	var last string
	for {
		resp, err := httpClient.Get(readyz.String())
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, lastLine(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			return errors.New("it exited before it was ready")
		case <-deadline:
			return fmt.Errorf("not ready after %v: %s", timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lastLine is the last non-empty line of s: /readyz ends with "readyz
// check failed" after naming the failing checks.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "readyz check failed") {
			return l
		}
	}
	return s
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func get(env *devenv.Env, path string) int {
	resp, err := env.HTTPClient.Get(env.URL + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

type process struct {
	pid  int
	argv []string
	env  []string
	dir  string
}

// apiServerProcess finds the kube-apiserver serving env's control plane by
// its --secure-port.
func apiServerProcess(env *devenv.Env) (*process, error) {
	u, err := url.Parse(env.ControlPlane.Config.Host)
	if err != nil {
		return nil, err
	}
	port := u.Port()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(argv[0]) != "kube-apiserver" || !containsArg(argv, "--secure-port="+port) {
			continue
		}
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		dir, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		var vars []string
		for _, v := range bytes.Split(environ, []byte{0}) {
			if len(v) > 0 {
				vars = append(vars, string(v))
			}
		}
		return &process{pid: pid, argv: argv, env: vars, dir: dir}, nil
	}
	return nil, fmt.Errorf("no kube-apiserver with --secure-port=%s", port)
}

func containsArg(argv []string, want string) bool {
	for _, a := range argv {
		if a == want {
			return true
		}
	}
	return false
}
