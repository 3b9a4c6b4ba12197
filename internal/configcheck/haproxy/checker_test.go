package haproxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// realChecker returns a Checker running the installed haproxy, with runs
// under a temporary directory that must be empty again after the test.
func realChecker(t testing.TB) *Checker {
	t.Helper()
	tmp := t.TempDir()
	runner, err := NewRunner(RunnerOptions{TempDir: tmp})
	if err != nil {
		t.Fatalf("NewRunner: %v (configcheck's tests run the real haproxy)", err)
	}
	c, err := New(Options{Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		entries, err := os.ReadDir(tmp)
		if err != nil {
			t.Error(err)
		}
		for _, e := range entries {
			t.Errorf("run directory left behind: %s", e.Name())
		}
	})
	return c
}

// fakeRunner stands in for haproxy in the scheduling tests: it counts its
// runs and answers result (or err) after delay, unless ctx ends first.
type fakeRunner struct {
	delay  time.Duration
	result RunResult
	err    error
	runs   atomic.Int64
}

func (f *fakeRunner) Run(ctx context.Context, out render.Output) (RunResult, error) {
	f.runs.Add(1)
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return RunResult{}, ctx.Err()
	}
	return f.result, f.err
}

// fakeChecker returns a Checker over a fakeRunner answering valid after
// delay.
func fakeChecker(t testing.TB, delay time.Duration, opts Options) (*Checker, *fakeRunner) {
	t.Helper()
	runner := &fakeRunner{delay: delay, result: RunResult{Valid: true}}
	opts.Runner = runner
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, runner
}

// waitForRuns waits until runner has started n runs.
func waitForRuns(t testing.TB, runner *fakeRunner, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); runner.runs.Load() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d runs started, want %d", runner.runs.Load(), n)
		}
	}
}

const validConfig = `global
    default-path config
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind 127.0.0.1:8080
    default_backend be_a
backend be_a
    server s1 127.0.0.1:8081
`

// selfSigned returns a PEM certificate followed by its PEM private key.
func selfSigned(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "example.test"},
		DNSNames:     []string{"example.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

// auxConfig uses a map (in a dynamic use_backend, the form resolved after
// parsing, and in an acl), a general file and a certificate.
const auxConfig = `global
    default-path config
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind 127.0.0.1:8443 ssl crt ssl/site.pem
    acl known_host req.hdr(host),lower,map(maps/hosts.map) -m found
    http-request deny unless known_host
    use_backend %[req.hdr(host),lower,map(maps/hosts.map,be_a)]
    errorfile 503 general/503.http
    default_backend be_a
backend be_a
    server s1 127.0.0.1:8081
backend be_b
    server s1 127.0.0.1:8082
`

const errorFile = "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\nunavailable\n"

// cleanMessage fails when a simplified message still carries what Simplify
// must remove.
func cleanMessage(t *testing.T, msg string) {
	t.Helper()
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`\(\d+\)`),            // PID
		regexp.MustCompile(`\d+/\d{6}`),          // old date prefix
		regexp.MustCompile(`gatehouse-haproxy-`), // temporary directory
		regexp.MustCompile(`(?i)fatal errors found|error\(s\) found`),
		regexp.MustCompile(`\[NOTICE\]|\[ALERT\] {2,}`),
		regexp.MustCompile(regexp.QuoteMeta(os.TempDir())),
	} {
		if bad.MatchString(msg) {
			t.Errorf("message matches %s:\n%s", bad, msg)
		}
	}
	if len(msg) > maxMessage {
		t.Errorf("message is %d bytes, more than %d", len(msg), maxMessage)
	}
}

func TestCheckRealHAProxy(t *testing.T) {
	cert := selfSigned(t)
	aux := func(mutate func(*render.Output)) render.Output {
		out := render.Output{
			HAProxyConfig: auxConfig,
			Maps:          map[string]string{"hosts.map": "a.example.test be_a\nb.example.test be_b\n"},
			Files:         map[string]string{"503.http": errorFile},
			Certs:         map[string]string{"site.pem": cert},
		}
		if mutate != nil {
			mutate(&out)
		}
		return out
	}
	tests := []struct {
		name  string
		out   render.Output
		valid bool
		// want are substrings of the message, in order.
		want []string
	}{
		{name: "valid minimal", out: render.Output{HAProxyConfig: validConfig}, valid: true},
		{
			name: "unknown keyword",
			out:  render.Output{HAProxyConfig: strings.Replace(validConfig, "    default_backend be_a\n", "    frobnicate now\n    default_backend be_a\n", 1)},
			want: []string{"[ALERT] config : parsing [haproxy.cfg:10] : unknown keyword 'frobnicate' in 'frontend' section", "\n  line 10: frobnicate now"},
		},
		{
			name: "duplicate backend",
			out:  render.Output{HAProxyConfig: validConfig + "backend be_a\n    server s2 127.0.0.1:8082\n"},
			want: []string{
				"[ALERT] config : Parsing [haproxy.cfg:13]: backend 'be_a' has the same name as backend 'be_a' declared at haproxy.cfg:11.",
				"\n  line 13: backend be_a",
				"\n  line 11: backend be_a",
			},
		},
		{
			name: "two alerts",
			out: render.Output{HAProxyConfig: strings.Replace(validConfig, "    default_backend be_a\n", "    frobnicate now\n    default_backend be_a\n", 1) +
				"backend be_a\n    server s2 127.0.0.1:8082\n"},
			want: []string{"unknown keyword 'frobnicate'", "\n  line 10: frobnicate now\n[ALERT] config : Parsing [haproxy.cfg:14]: backend 'be_a'", "\n  line 14: backend be_a"},
		},
		{name: "map, general file and certificate", out: aux(nil), valid: true},
		{
			name: "unresolvable server name (strict DNS)",
			out:  render.Output{HAProxyConfig: validConfig + "backend be_dns\n    server s1 backend.nowhere.invalid:80\n"},
			want: []string{"[haproxy.cfg:14]", "could not resolve address 'backend.nowhere.invalid'", "\n  line 14: server s1 backend.nowhere.invalid:80"},
		},
		{
			name: "missing map file",
			out:  aux(func(o *render.Output) { o.Maps = nil }),
			want: []string{"[ALERT] config : ", "[haproxy.cfg:10]", "maps/hosts.map", "\n  line 10: acl known_host req.hdr(host),lower,map(maps/hosts.map) -m found"},
		},
		{
			name: "map in use_backend missing",
			out: aux(func(o *render.Output) {
				o.Maps = map[string]string{"other.map": "x y\n"}
				o.HAProxyConfig = strings.Replace(auxConfig, "map(maps/hosts.map) -m found", "map(maps/other.map) -m found", 1)
			}),
			want: []string{"[haproxy.cfg:12]", "failed to open pattern file <maps/hosts.map>", "\n  line 12: use_backend %[req.hdr(host),lower,map(maps/hosts.map,be_a)]"},
		},
		{
			name: "missing certificate",
			out:  aux(func(o *render.Output) { o.Certs = nil }),
			want: []string{"[haproxy.cfg:9]", "ssl/site.pem", "\n  line 9: bind 127.0.0.1:8443 ssl crt ssl/site.pem"},
		},
	}
	c := realChecker(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := c.Check(context.Background(), tt.out)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if v.Valid != tt.valid {
				t.Fatalf("Valid = %v, want %v; message:\n%s", v.Valid, tt.valid, v.Message)
			}
			if v.Cached || v.Duration <= 0 {
				t.Errorf("Cached = %v, Duration = %v: want a run of its own", v.Cached, v.Duration)
			}
			if v.Checksum != Checksum(tt.out) {
				t.Errorf("Checksum = %s, want Checksum(out) = %s", v.Checksum, Checksum(tt.out))
			}
			if tt.valid {
				if v.Message != "" {
					t.Errorf("valid verdict with message %q", v.Message)
				}
				return
			}
			cleanMessage(t, v.Message)
			rest := v.Message
			for _, want := range tt.want {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("message lacks %q (in order):\n%s", want, v.Message)
				}
				rest = rest[i+len(want):]
			}
			t.Logf("message:\n%s", v.Message)
		})
	}
}

func TestNew(t *testing.T) {
	c, err := New(Options{Runner: &fakeRunner{}})
	if err != nil {
		t.Fatalf("New with defaults: %v", err)
	}
	if c.opts.MaxConcurrent < 1 || c.opts.CacheSize != defaultCacheSize || c.slots == nil {
		t.Errorf("defaults not applied: %+v", c.opts)
	}
	for _, tt := range []struct {
		name string
		opts Options
		want string
	}{
		{"no runner", Options{}, "a Runner is required"},
		{"negative concurrency", Options{Runner: &fakeRunner{}, MaxConcurrent: -1}, "MaxConcurrent -1"},
		{"negative cache", Options{Runner: &fakeRunner{}, CacheSize: -1}, "CacheSize -1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New(%+v) = %v, want an error containing %q", tt.opts, err, tt.want)
			}
		})
	}
}

func TestNewRunner(t *testing.T) {
	r, err := NewRunner(RunnerOptions{})
	if err != nil {
		t.Fatalf("NewRunner with defaults: %v", err)
	}
	if !filepath.IsAbs(r.opts.Binary) || r.opts.TempDir != os.TempDir() || r.opts.Confinement.Nice <= 0 ||
		r.opts.Confinement.CPUTime <= 0 || r.opts.Confinement.AddressSpace == 0 {
		t.Errorf("defaults not applied: %+v", r.opts)
	}
	missing := filepath.Join(t.TempDir(), "no-haproxy")
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		opts RunnerOptions
		want string
	}{
		{"missing binary path", RunnerOptions{Binary: missing}, "haproxy not found ("},
		{"missing binary name", RunnerOptions{Binary: "no-such-haproxy-binary"}, "haproxy not found ("},
		{"missing temp dir", RunnerOptions{TempDir: missing}, "temporary directory"},
		{"temp dir is a file", RunnerOptions{TempDir: notDir}, "not a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRunner(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewRunner(%+v) = %v, want an error containing %q", tt.opts, err, tt.want)
			}
			if strings.HasPrefix(tt.want, "haproxy not found") && !strings.HasSuffix(err.Error(), ": install Debian's package: apt-get install haproxy") {
				t.Errorf("error lacks the install hint: %v", err)
			}
		})
	}
	t.Run("binary not in PATH", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := findBinary("haproxy")
		if err == nil || !strings.Contains(err.Error(), "apt-get install haproxy") {
			t.Fatalf("findBinary = %v, want the install hint", err)
		}
	})
}

func TestChecksum(t *testing.T) {
	base := func() render.Output {
		return render.Output{
			HAProxyConfig: "global\n",
			Maps:          map[string]string{"a.map": "x 1\n", "b.map": "y 2\n"},
			Files:         map[string]string{"503.http": "page\n"},
			Certs:         map[string]string{"site.pem": "PEM\n"},
		}
	}
	variants := map[string]func(*render.Output){
		"config":                    func(o *render.Output) { o.HAProxyConfig = "global \n" },
		"map content":               func(o *render.Output) { o.Maps["a.map"] = "x 2\n" },
		"map name":                  func(o *render.Output) { o.Maps = map[string]string{"a2.map": "x 1\n", "b.map": "y 2\n"} },
		"map added":                 func(o *render.Output) { o.Maps["c.map"] = "" },
		"map removed":               func(o *render.Output) { delete(o.Maps, "b.map") },
		"file content":              func(o *render.Output) { o.Files["503.http"] = "other\n" },
		"cert content":              func(o *render.Output) { o.Certs["site.pem"] = "PEM2\n" },
		"file moved to maps":        func(o *render.Output) { delete(o.Files, "503.http"); o.Maps["503.http"] = "page\n" },
		"cert moved to files":       func(o *render.Output) { delete(o.Certs, "site.pem"); o.Files["site.pem"] = "PEM\n" },
		"content moved into config": func(o *render.Output) { o.HAProxyConfig = "global\nPEM\n"; o.Certs = nil },
	}
	seen := map[string]string{Checksum(base()): "base"}
	for name, mutate := range variants {
		out := base()
		mutate(&out)
		sum := Checksum(out)
		if other, ok := seen[sum]; ok {
			t.Errorf("%s has the checksum of %s", name, other)
		}
		seen[sum] = name
	}

	// Name/content framing.
	ab := Checksum(render.Output{Maps: map[string]string{"a": "bc"}})
	if ab == Checksum(render.Output{Maps: map[string]string{"ab": "c"}}) {
		t.Error(`map "a"→"bc" and "ab"→"c" share a checksum`)
	}
	if Checksum(render.Output{Maps: map[string]string{"a": "b", "c": "d"}}) == Checksum(render.Output{Maps: map[string]string{"a": "bcd"}}) {
		t.Error("two maps share a checksum with one")
	}
	// Deterministic, whatever the map order; nil and empty alike.
	want := Checksum(base())
	for range 20 {
		if got := Checksum(base()); got != want {
			t.Fatalf("checksum changed between calls: %s, %s", want, got)
		}
	}
	if Checksum(render.Output{HAProxyConfig: "x"}) != Checksum(render.Output{HAProxyConfig: "x", Maps: map[string]string{}}) {
		t.Error("nil and empty maps differ")
	}
	if len(want) != 64 {
		t.Errorf("checksum %q is not sha256 hex", want)
	}
}

func TestCache(t *testing.T) {
	t.Run("identical output reuses the verdict", func(t *testing.T) {
		c, runner := fakeChecker(t, time.Millisecond, Options{})
		out := render.Output{HAProxyConfig: "global\n", Maps: map[string]string{"a.map": "x\n"}}
		first, err := c.Check(context.Background(), out)
		if err != nil || !first.Valid || first.Cached || first.Duration <= 0 {
			t.Fatalf("first Check = %+v, %v", first, err)
		}
		// A copy: identical content, not the same maps.
		again := render.Output{HAProxyConfig: "global\n", Maps: map[string]string{"a.map": "x\n"}}
		second, err := c.Check(context.Background(), again)
		if err != nil || !second.Valid || !second.Cached || second.Duration != 0 || second.Checksum != first.Checksum {
			t.Fatalf("second Check = %+v, %v; want the first's verdict, cached", second, err)
		}
		if n := runner.runs.Load(); n != 1 {
			t.Fatalf("haproxy ran %d times, want 1", n)
		}
		changed := render.Output{HAProxyConfig: "global\n", Maps: map[string]string{"a.map": "y\n"}}
		third, err := c.Check(context.Background(), changed)
		if err != nil || third.Cached || third.Checksum == first.Checksum {
			t.Fatalf("Check after a map change = %+v, %v; want a new run", third, err)
		}
		if n := runner.runs.Load(); n != 2 {
			t.Fatalf("haproxy ran %d times, want 2", n)
		}
		if s := c.Stats(); s != (Stats{Runs: 2, CacheHits: 1}) {
			t.Errorf("Stats = %+v", s)
		}
	})
	t.Run("invalid verdicts are cached", func(t *testing.T) {
		c, runner := fakeChecker(t, 0, Options{})
		runner.result = RunResult{Message: "[ALERT] config : parsing [haproxy.cfg:1] : unknown keyword"}
		out := render.Output{HAProxyConfig: "bogus\n"}
		for i := range 2 {
			v, err := c.Check(context.Background(), out)
			if err != nil || v.Valid || v.Cached != (i == 1) || v.Message != runner.result.Message {
				t.Fatalf("Check %d = %+v, %v", i, v, err)
			}
		}
		if n := runner.runs.Load(); n != 1 {
			t.Fatalf("haproxy ran %d times, want 1", n)
		}
	})
	t.Run("errors are not cached", func(t *testing.T) {
		c, runner := fakeChecker(t, 0, Options{})
		runner.err = errors.New("haproxy -c ended without a verdict")
		out := render.Output{HAProxyConfig: "global\n"}
		for i := range 2 {
			if v, err := c.Check(context.Background(), out); err == nil {
				t.Fatalf("Check %d = %+v, want the runner's error", i, v)
			}
		}
		if n := runner.runs.Load(); n != 2 {
			t.Fatalf("haproxy ran %d times, want 2", n)
		}
	})
	t.Run("least recently used is evicted", func(t *testing.T) {
		c, runner := fakeChecker(t, 0, Options{CacheSize: 2})
		outs := []render.Output{{HAProxyConfig: "a\n"}, {HAProxyConfig: "b\n"}, {HAProxyConfig: "c\n"}}
		check := func(o render.Output) Verdict {
			v, err := c.Check(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		check(outs[0])
		check(outs[1])
		check(outs[0]) // a is now the most recently used
		check(outs[2]) // evicts b
		if !check(outs[0]).Cached || check(outs[1]).Cached {
			t.Error("want a cached and b evicted")
		}
		if n := runner.runs.Load(); n != 4 {
			t.Errorf("haproxy ran %d times, want 4", n)
		}
	})
	t.Run("concurrent identical checks share one run", func(t *testing.T) {
		c, runner := fakeChecker(t, 300*time.Millisecond, Options{MaxConcurrent: 2})
		out := render.Output{HAProxyConfig: "global\n"}
		const n = 6
		verdicts := make([]Verdict, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { verdicts[i], errs[i] = c.Check(context.Background(), out) })
		}
		wg.Wait()
		own := 0
		for i := range n {
			if errs[i] != nil || !verdicts[i].Valid {
				t.Fatalf("Check %d = %+v, %v", i, verdicts[i], errs[i])
			}
			if !verdicts[i].Cached {
				own++
			}
		}
		if runs := runner.runs.Load(); runs != 1 || own != 1 {
			t.Fatalf("haproxy ran %d times, %d verdicts not shared; want 1 and 1", runs, own)
		}
	})
}

func TestBadFileNames(t *testing.T) {
	c, runner := fakeChecker(t, 0, Options{})
	for _, name := range []string{"", ".", "..", "a/b", "../escape", "/abs", "nul\x00byte"} {
		for _, field := range []string{"maps", "files", "sslCertificates"} {
			out := render.Output{HAProxyConfig: "global\n"}
			files := map[string]string{"ok.map": "x\n", name: "content\n"}
			switch field {
			case "maps":
				out.Maps = files
			case "files":
				out.Files = files
			default:
				out.Certs = files
			}
			v, err := c.Check(context.Background(), out)
			if err != nil {
				t.Fatalf("%s[%q]: Check error %v, want an invalid verdict", field, name, err)
			}
			if want := fmt.Sprintf("%s[%q]", field, name); v.Valid || !strings.Contains(v.Message, want) || strings.Contains(v.Message, "ok.map") {
				t.Errorf("%s[%q]: verdict %+v, want invalid naming %s only", field, name, v, want)
			}
		}
	}
	if n := runner.runs.Load(); n != 0 {
		t.Errorf("haproxy ran %d times for bad names", n)
	}
}

// processGone reports whether pid has exited (or is a zombie nobody reaped).
func processGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// TestDeadlineIsNotAVerdict: a check ended by its context returns the
// context's error at once, remembers nothing, and the next check runs again.
func TestDeadlineIsNotAVerdict(t *testing.T) {
	c, runner := fakeChecker(t, time.Minute, Options{})
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		v, err := c.Check(ctx, render.Output{HAProxyConfig: "global\n"})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || v.Cached {
			t.Fatalf("Check %d = %+v, %v; want the deadline's error", i, v, err)
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Fatalf("Check %d returned after %v, want about 300ms", i, elapsed)
		}
	}
	if n := runner.runs.Load(); n != 2 {
		t.Fatalf("runs = %d, want 2 (a cancellation is not remembered)", n)
	}
}

// TestDeadlineKillsRun: the process runner kills haproxy when the
// context ends, returns at once, and leaves neither a process nor a
// directory behind.
func TestDeadlineKillsRun(t *testing.T) {
	tmp := t.TempDir()
	r, err := NewRunner(RunnerOptions{TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	// Large enough that haproxy -c runs far longer than the deadline.
	out := bigConfig(40000)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := r.Run(ctx, out)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %+v, %v; want the deadline's error", res, err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("Run returned after %v, want about 100ms", elapsed)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil || len(entries) > 0 {
		t.Errorf("run directories left behind: %v (%v)", entries, err)
	}
	// No process still works in (what was) a run directory of ours.
	procs, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, link := range procs {
		if cwd, err := os.Readlink(link); err == nil && strings.HasPrefix(cwd, tmp) {
			pid, _ := strconv.Atoi(strings.Split(link, "/")[2])
			if !processGone(pid) {
				t.Errorf("process %d still runs in %s after the check returned", pid, cwd)
			}
		}
	}
}

// TestNoEarlyRefusalWithinTwiceTheTimeLeft: the estimate is made under
// contention and overstates the wait, so a check expected to finish a little
// after its deadline waits for the slot; the deadline still ends it.
func TestNoEarlyRefusalWithinTwiceTheTimeLeft(t *testing.T) {
	c, runner := fakeChecker(t, 500*time.Millisecond, Options{MaxConcurrent: 1})
	go func() { _, _ = c.Check(context.Background(), render.Output{HAProxyConfig: "first\n"}) }()
	waitForRuns(t, runner, 1)
	// Expected wait: one run ahead (100 ms assumed before any finished),
	// plus its own; 150 ms left is more than half of it.
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := c.Check(ctx, render.Output{HAProxyConfig: "second\n"})
	if errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Check = %v; want a wait ended by the deadline, not ErrBusy", err)
	}
}

func TestEarlyRefusal(t *testing.T) {
	c, runner := fakeChecker(t, 500*time.Millisecond, Options{MaxConcurrent: 1})
	holder := make(chan error, 1)
	go func() {
		_, err := c.Check(context.Background(), render.Output{HAProxyConfig: "first\n"})
		holder <- err
	}()
	// Wait until the first check holds the slot (its run has started).
	waitForRuns(t, runner, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	v, err := c.Check(ctx, render.Output{HAProxyConfig: "second\n"})
	if !errors.Is(err, ErrBusy) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Check = %+v, %v; want ErrBusy at once, not a wait until the deadline", v, err)
	}
	if !strings.Contains(err.Error(), "1 checks queued or running") || !strings.Contains(err.Error(), "expected wait 200ms") {
		t.Errorf("ErrBusy message lacks the queue and the expected wait: %v", err)
	}
	if c.Stats().Busy != 1 {
		t.Errorf("Stats = %+v, want Busy 1", c.Stats())
	}

	// With time enough, a check waits for the slot.
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if v, err := c.Check(ctx, render.Output{HAProxyConfig: "third\n"}); err != nil || !v.Valid {
		t.Fatalf("Check with a 10s deadline = %+v, %v", v, err)
	}
	if err := <-holder; err != nil {
		t.Fatal(err)
	}

	// A wait for the slot ends with ctx, too.
	c2, runner2 := fakeChecker(t, time.Second, Options{MaxConcurrent: 1})
	long := make(chan error, 1)
	go func() {
		_, err := c2.Check(context.Background(), render.Output{HAProxyConfig: "long\n"})
		long <- err
	}()
	waitForRuns(t, runner2, 1)
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := c2.Check(ctx, render.Output{HAProxyConfig: "waiting\n"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Check waiting for the slot = %v, want context.Canceled", err)
	}
	if err := <-long; err != nil {
		t.Fatal(err)
	}
}

// TestEnvironment: haproxy sees none of Gatehouse's environment, so a
// config's "${VAR}" (which the policy refuses anyway) cannot copy a
// credential into a denial. The runner, below the policy, is tested alone.
func TestEnvironment(t *testing.T) {
	t.Setenv("GATEHOUSE_TEST_SECRET", "hunter2")
	r, err := NewRunner(RunnerOptions{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), render.Output{HAProxyConfig: ".alert \"secret=[${GATEHOUSE_TEST_SECRET}] home=[${HOME}] path=[${PATH}]\"\nglobal\n"})
	if err != nil || res.Valid || !strings.Contains(res.Message, "'secret=[] home=[] path=[]'") {
		t.Errorf("Run = %+v, %v; want haproxy to see an empty environment", res, err)
	}
}

func TestEarlyRefusalOfIdenticalCheck(t *testing.T) {
	c, runner := fakeChecker(t, 500*time.Millisecond, Options{MaxConcurrent: 2})
	// One measured run: the average becomes about 500ms.
	if _, err := c.Check(context.Background(), render.Output{HAProxyConfig: "warm-up\n"}); err != nil {
		t.Fatal(err)
	}
	out := render.Output{HAProxyConfig: "same\n"}
	holder := make(chan error, 1)
	go func() {
		_, err := c.Check(context.Background(), out)
		holder <- err
	}()
	waitForRuns(t, runner, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	v, err := c.Check(ctx, out)
	if !errors.Is(err, ErrBusy) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("identical Check = %+v, %v; want ErrBusy at once", v, err)
	}
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
}

// TestPolicyRefusesBeforeTheRunner: a rendering outside the check policy
// never reaches haproxy; the refusal is a verdict (remembered like any),
// naming the line and the rule.
func TestPolicyRefusesBeforeTheRunner(t *testing.T) {
	c, runner := fakeChecker(t, 0, Options{})
	out := render.Output{HAProxyConfig: "global\n  lua-load general/x.lua\n", Files: map[string]string{"x.lua": "os.execute('id')\n"}}
	for i := range 2 {
		v, err := c.Check(context.Background(), out)
		if err != nil || v.Valid || !v.Refused || v.Cached != (i == 1) {
			t.Fatalf("Check %d = %+v, %v; want a policy refusal", i, v, err)
		}
		if !strings.HasPrefix(v.Message, PolicyRefuses) || !strings.Contains(v.Message, "haproxy.cfg:2") || !strings.Contains(v.Message, RuleNoLua) {
			t.Errorf("refusal does not name the line and the rule:\n%s", v.Message)
		}
	}
	if n := runner.runs.Load(); n != 0 {
		t.Fatalf("the runner ran %d times for a rendering outside the policy", n)
	}
	allowed, runner := fakeChecker(t, 0, Options{Policy: Policy{AllowLua: true}})
	if v, err := allowed.Check(context.Background(), out); err != nil || !v.Valid || v.Refused || runner.runs.Load() != 1 {
		t.Fatalf("with AllowLua: %+v, %v, runs %d; want haproxy to judge it", v, err, runner.runs.Load())
	}
}

// gateRunner holds the first run until released, and answers the others
// valid at once.
type gateRunner struct {
	first   atomic.Bool
	held    chan string // the held run's configuration
	release chan struct{}
}

func (g *gateRunner) Run(ctx context.Context, out render.Output) (RunResult, error) {
	if g.first.CompareAndSwap(false, true) {
		g.held <- out.HAProxyConfig
		select {
		case <-g.release:
		case <-ctx.Done():
			return RunResult{}, ctx.Err()
		}
	}
	return RunResult{Valid: true}, nil
}

// TestLessUrgentChecksLeaveASlotForRealChanges: two slots, and a flood of
// dry runs (and of reviews Gatehouse could not verify, the same class): one
// of them runs, the others wait, and a real change's check runs on the
// slot they leave at once, whether it is identical to a waiting dry run's
// (it shares no run with it) or not.
func TestLessUrgentChecksLeaveASlotForRealChanges(t *testing.T) {
	g := &gateRunner{held: make(chan string, 1), release: make(chan struct{})}
	c, err := New(Options{Runner: g, MaxConcurrent: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dry := fair.WithShare(ctx, "tenant-a", fair.DryRun)
	config := func(i int) string { return fmt.Sprintf("global\n# dry run %d\n", i) }
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.Check(dry, render.Output{HAProxyConfig: config(i)})
		}()
	}
	held := <-g.held
	for c.slots.Waiting() != 3 {
		runtime.Gosched()
	}
	waiting := config(0)
	if held == waiting {
		waiting = config(1)
	}
	// Bounded, so that a real check left waiting fails the test.
	realCtx, cancelReal := context.WithTimeout(ctx, 10*time.Second)
	defer cancelReal()
	real := fair.WithShare(realCtx, "tenant-b", fair.Real)
	for _, cfg := range []string{"global\n# real\n", waiting} {
		v, err := c.Check(real, render.Output{HAProxyConfig: cfg})
		if err != nil || !v.Valid {
			t.Fatalf("a real change's check %q behind dry runs: %+v, %v", cfg, v, err)
		}
	}
	close(g.release)
	wg.Wait()
}
