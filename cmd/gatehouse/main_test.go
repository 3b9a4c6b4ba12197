package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// binary is the gatehouse command built from this package, run as a user
// runs it.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gatehouse-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "gatehouse")
	// In make build's configuration (static, -trimpath: the Makefile's
	// GO_STATIC), whose compiled packages this build then links.
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X github.com/gatehouse-dev/gatehouse/internal/version.Version="+testVersion, "-o", binary, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gatehouse:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// gatehouse runs the binary with args, away from any cluster: a command
// line that starts the server by mistake fails to find a kubeconfig and
// exits 1 at once.
func gatehouse(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return gatehouseWithEnv(t, nil, args...)
}

// gatehouseWithEnv is gatehouse with more environment variables, as a CI
// job's secrets would be.
func gatehouseWithEnv(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	home := t.TempDir()
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + filepath.Join(home, "none")}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("gatehouse %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errOut.String()
}

// testVersion is linked into the binary under test, as make build links
// the chart's appVersion.
const testVersion = "v0.0.0-clitest"

// TestVersion: --version and the word version print the linked version,
// the revision and the Go version, and exit 0 without serving.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, stdout, stderr := gatehouse(t, args...)
		if code != 0 || !strings.HasPrefix(stdout, "gatehouse "+testVersion+" (revision ") || !strings.Contains(stdout, runtime.Version()) {
			t.Errorf("gatehouse %s: exit %d, stdout %q, stderr %q; want 0 and \"gatehouse %s (revision ..., %s)\"", strings.Join(args, " "), code, stdout, stderr, testVersion, runtime.Version())
		}
	}
}

// TestHelpExitsZeroAndNamesTheCommands: before, "gatehouse help" started
// the server, --help did not mention configcheck, and
// "configcheck test --help" exited 2.
func TestHelpExitsZeroAndNamesTheCommands(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"serve", "--help"}, {"help", "serve"}, {"configcheck", "--help"}, {"configcheck", "test", "--help"}, {"help", "configcheck", "test"}} {
		code, stdout, stderr := gatehouse(t, args...)
		if code != 0 {
			t.Errorf("gatehouse %s: exit %d, want 0\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
		if !strings.Contains(stdout, "Usage:") {
			t.Errorf("gatehouse %s: no usage on standard output:\n%s", strings.Join(args, " "), stdout)
		}
	}
	_, root, _ := gatehouse(t, "--help")
	for _, want := range []string{"\n  configcheck ", "\n  serve ", "\n  help "} {
		if !strings.Contains(root, want) {
			t.Errorf("gatehouse --help does not list %q:\n%s", strings.TrimSpace(want), root)
		}
	}
	_, test, _ := gatehouse(t, "configcheck", "test", "--help")
	for _, want := range []string{"-f, --filename", "--output", "--test", "--dump-rendered", "--haproxy-binary", "--allow-lua", "Exit status: 0 every test passed, 1 a test failed, 2"} {
		if !strings.Contains(test, want) {
			t.Errorf("gatehouse configcheck test --help does not mention %q:\n%s", want, test)
		}
	}
}

// TestServerFlagsKeepTheirNamesAndDefaults: the chart, config/,
// internal/testing/devenv and the tests pass these flags; gatehouse with no command
// (the chart's form) and gatehouse serve read them alike.
func TestServerFlagsKeepTheirNamesAndDefaults(t *testing.T) {
	flags := []string{
		"--modules", "--enforcement", "--config", "--pvsafe-bypass", "--cert-dir", "--cert-secret", "--self-managed-certs",
		"--client-ca-file", "--client-names", "--webhook-service", "--webhook-service-port", "--manage-webhooks-url",
		"--manage-webhooks-ca-file", "--leader-elect", "--namespace", "--metrics-bind-address", "--metrics-secure",
		"--pprof-bind-address", "--tls-min-version", "--enable-http2", "--max-in-flight-bytes", "--max-in-flight-decision-bytes",
		"--in-flight-wait", "--placement-platform-users", "--placement-platform-groups", "--configcheck-allow-lua",
		"--configcheck-allow-unconfined", "--kubeconfig", "--zap-log-level", "--zap-devel",
	}
	for _, cmd := range [][]string{{"--help"}, {"serve", "--help"}} {
		_, help, _ := gatehouse(t, cmd...)
		for _, f := range flags {
			if !strings.Contains(help, f+" ") {
				t.Errorf("gatehouse %s does not list %s", strings.Join(cmd, " "), f)
			}
		}
		for _, def := range []string{`(default ":9443")`, `(default "/etc/gatehouse/tls")`, `(default "1.2")`, `(default 443)`} {
			if !strings.Contains(help, def) {
				t.Errorf("gatehouse %s: the default %s is gone", strings.Join(cmd, " "), def)
			}
		}
	}
	// The flags reach the server: a bad value is refused by it (exit 1),
	// in both forms, the Go flag package's --name=value and --name value.
	for _, args := range [][]string{
		{"--modules=pvsafe", "--tls-min-version=1.0"},
		{"serve", "--modules", "pvsafe", "--tls-min-version", "1.0"},
	} {
		code, _, stderr := gatehouse(t, args...)
		if code != 1 || !strings.Contains(stderr, `TLS version "1.0": want 1.2 or 1.3`) {
			t.Errorf("gatehouse %s: exit %d %q, want 1 and the server's refusal", strings.Join(args, " "), code, stderr)
		}
	}
}

// TestUnknownWordsAndFlagsExitNonZero: a typo never starts the server.
func TestUnknownWordsAndFlagsExitNonZero(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"servre"}, `unknown command "servre" for "gatehouse"`},
		{[]string{"--modules=pvsafe", "extra"}, `unknown command "extra" for "gatehouse"`},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"serve", "now"}, `unknown command "now" for "gatehouse serve"`},
		{[]string{"configcheck", "tset"}, `unknown command "tset" for "gatehouse configcheck"`},
		{[]string{"configcheck", "test"}, "-f is required"},
		{[]string{"configcheck", "test", "-f", "x.yaml", "--output", "xml"}, `--output "xml": want summary or json`},
		{[]string{"configcheck", "test", "--verbose"}, "unknown flag: --verbose"},
	} {
		code, stdout, stderr := gatehouse(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("gatehouse %s: exit %d, stderr %q; want 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
		if stdout != "" {
			t.Errorf("gatehouse %s printed %q on standard output", strings.Join(tc.args, " "), stdout)
		}
	}
}

// TestConfigcheckTestJSONAndExitStatus: the report's fields are
// lowerCamelCase and its durations seconds (before: Go's field names and
// nanoseconds); the exit status says passed (0), failed (1), could not run
// (2). It runs the real haproxy -c, as the command does.
func TestConfigcheckTestJSONAndExitStatus(t *testing.T) {
	example, err := os.ReadFile("../../examples/configcheck/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	failing := bytes.Replace(example, []byte(`{type: contains, pattern: 'server s1 10\.0\.0\.10:80'}`), []byte(`{type: contains, pattern: 'server s9'}`), 1)
	if bytes.Equal(failing, example) {
		t.Fatal("the example's assertion to break is gone")
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"ok.yaml": example, "failing.yaml": failing} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	code, stdout, stderr := gatehouse(t, "configcheck", "test", "-f", filepath.Join(dir, "failing.yaml"), "--output", "json")
	if code != 1 {
		t.Fatalf("a failing test: exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	var report map[string]any
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if keys := sortedKeys(report); !slices.Equal(keys, []string{"failed", "passed", "results", "total"}) {
		t.Fatalf("report fields %v, want failed, passed, results, total", keys)
	}
	if report["total"] != 5.0 || report["failed"] != 1.0 || report["passed"] != 4.0 {
		t.Fatalf("counts: %s", stdout)
	}
	var failed map[string]any
	for _, r := range report["results"].([]any) {
		result := r.(map[string]any)
		for k := range result {
			if !slices.Contains([]string{"name", "description", "passed", "renderError", "failures", "durationSeconds"}, k) {
				t.Errorf("result field %q", k)
			}
		}
		if d, ok := result["durationSeconds"].(float64); !ok || d <= 0 || d > 60 {
			t.Errorf("durationSeconds %v of %v: want seconds", result["durationSeconds"], result["name"])
		}
		if result["passed"] == false {
			failed = result
		}
	}
	if failed == nil || failed["name"] != "ok-single-ingress" {
		t.Fatalf("the failed test is not reported: %s", stdout)
	}
	failures, _ := failed["failures"].([]any)
	if len(failures) != 1 || sortedKeys(failures[0].(map[string]any))[0] != "assertion" || !strings.Contains(failures[0].(map[string]any)["message"].(string), "server s9") {
		t.Fatalf("failures %v, want one with assertion and message", failed["failures"])
	}

	if code, stdout, stderr := gatehouse(t, "configcheck", "test", "-f", filepath.Join(dir, "ok.yaml")); code != 0 || !strings.Contains(stdout, "5/5 tests passed") {
		t.Fatalf("every test passing: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := gatehouse(t, "configcheck", "test", "-f", filepath.Join(dir, "ok.yaml"), "--test", "no-such-test"); code != 2 || stderr == "" {
		t.Fatalf("no such test: exit %d %q, want 2 and why", code, stderr)
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
