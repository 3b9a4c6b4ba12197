package chaos

import (
	"bytes"
	"context"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/devenv"
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
	startAPIServer(t, cmd)
	waitFor(t, "the API server answers again", func() error {
		return c.Get(ctx, client.ObjectKeyFromObject(kept), &corev1.PersistentVolume{})
	})
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
	// SIGKILL is delivered asynchronously: until the process is gone its
	// listening socket holds the port, and a new kube-apiserver started on
	// the same command line would fail to bind (seen under make test's
	// load as a restarted API server that never answered).
	deadline := time.Now().Add(30 * time.Second)
	for !exited(p.pid) {
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver %d still running 30 s after SIGKILL", p.pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// exited reports whether pid is gone or a zombie (dead, not yet reaped).
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

// startAPIServer starts p's command line again, with extra flags appended
// (a later flag wins), and stops it when the test ends, before the control
// plane's own cleanup.
func startAPIServer(t *testing.T, p *process, extra ...string) {
	t.Helper()
	cmd := exec.Command(p.argv[0], append(p.argv[1:], extra...)...)
	cmd.Env, cmd.Dir = p.env, p.dir
	log, err := os.Create(filepath.Join(t.TempDir(), "kube-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	// A restarted API server that dies says why, instead of leaving the
	// test to wait for answers that never come.
	go func() {
		select {
		case <-exited:
			if t.Context().Err() == nil {
				tail, _ := os.ReadFile(log.Name())
				if len(tail) > 4096 {
					tail = tail[len(tail)-4096:]
				}
				t.Errorf("the restarted kube-apiserver exited (%v); its log ends:\n%s", cmd.ProcessState, tail)
			}
		case <-t.Context().Done():
		}
	}()
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
	})
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
