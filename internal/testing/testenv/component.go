package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// component is a control-plane binary run next to envtest's etcd and
// kube-apiserver, logging into a file.
type component struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	log     *os.File
	exited  chan struct{}
	waitErr error
}

func startComponent(name, binary string, args []string, logPath string) (*component, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = ProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &component{name: name, logPath: logPath, cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// waitHealthy polls the component's /healthz, which its authorizer always
// allows, until it answers ok.
func (c *component) waitHealthy(ctx context.Context, port int, timeout time.Duration) error {
	// The component serves a certificate it made up itself; only liveness
	// on loopback is checked here.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(body.String()))
		} else {
			last = err.Error()
		}
		select {
		case <-c.exited:
			return fmt.Errorf("%s exited before it was healthy (%v); log %s:\n%s", c.name, c.waitErr, c.logPath, c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy after %s (%s); log %s:\n%s", c.name, timeout, last, c.logPath, c.logTail())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *component) logTail() string { return LogTail(c.logPath, 20) }

// LogTail is the last n lines of the log file at path (or why it could not
// be read), for an error that says why a process did not start.
func LogTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop sends SIGTERM and, if the component has not exited within the
// timeout, SIGKILL.
func (c *component) stop(timeout time.Duration) error {
	defer c.log.Close()
	select {
	case <-c.exited:
		return c.exitError()
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return nil
	case <-time.After(timeout):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", c.name, timeout)
	}
}

// exitError reports a component that exited before it was asked to.
func (c *component) exitError() error {
	if c.waitErr == nil {
		return fmt.Errorf("%s exited by itself; log %s", c.name, c.logPath)
	}
	return fmt.Errorf("%s exited by itself (%w); log %s", c.name, c.waitErr, c.logPath)
}

// FreePort is a TCP port free on loopback now, which the caller (a test, a
// local component) binds next. It is chosen below the kernel's ephemeral
// range and never twice in one process: a port the kernel handed out for
// port 0 goes back into that range once released, where the next outgoing
// connection of any process on the machine (make test runs the e2e and
// chaos packages side by side, each with thousands of connections) may take
// it before the caller binds it, and the caller then fails to start.
// Outgoing connections and port-0 listeners only use the ephemeral range,
// so a port below it stays free until someone binds it by number.
func FreePort() (int, error) {
	low, high := portRangeBelowEphemeral()
	freePorts.Lock()
	defer freePorts.Unlock()
	for range 200 {
		port := low + rand.IntN(high-low)
		if freePorts.given[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // bound by someone else
		}
		_ = l.Close()
		freePorts.given[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port in %d-%d after 200 tries", low, high-1)
}

// freePorts are the ports FreePort gave in this process.
var freePorts = struct {
	sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}

// portRangeBelowEphemeral is [low, high): the ports from 10000 up to the
// start of the kernel's ephemeral range (net.ipv4.ip_local_port_range,
// 32768 by default), or 20000-30000 if that range starts too low to leave
// room.
func portRangeBelowEphemeral() (low, high int) {
	low, high = 10000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if fields := strings.Fields(string(b)); len(fields) == 2 {
			if start, err := strconv.Atoi(fields[0]); err == nil {
				high = start
			}
		}
	}
	if high-low < 5000 {
		return 20000, 30000
	}
	return low, high
}

// ProcAttr returns the attributes every process the harness starts gets:
// its own process group, so that a Ctrl-C at `make run` reaches only devenv,
// which then stops the processes in order; SIGKILL when the harness dies
// (Linux), so that a test binary killed by -timeout or by hand leaves
// nothing behind; and none of the descriptors the harness inherited.
func ProcAttr() *syscall.SysProcAttr { return sysProcAttr() }
