package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// TestTestCommandRunsTheExampleSuites: every module's example suite passes
// with the built binary, and an HAProxyTemplateConfig is a suite of its
// own (what `gatehouse configcheck test` runs).
func TestTestCommandRunsTheExampleSuites(t *testing.T) {
	suites, err := filepath.Glob("../../examples/*/suite.yaml")
	if err != nil || len(suites) < 4 {
		t.Fatalf("example suites: %v %v; want one per module", suites, err)
	}
	args := []string{"test"}
	for _, s := range suites {
		args = append(args, "-f", s)
	}
	code, stdout, stderr := gatehouse(t, append(args, "-f", "../../examples/configcheck/config.yaml")...)
	if code != 0 || strings.Contains(stdout, "FAIL") {
		t.Fatalf("gatehouse test of the examples: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, module := range []string{"nodegroup", "pvsafe", "placement", "configcheck"} {
		if !strings.Contains(stdout, module+" (") {
			t.Errorf("no suite of %s in the report:\n%s", module, stdout)
		}
	}
}

// wrongSuite expects pvsafe to allow the deletion of a namespace holding a
// claim on a Delete volume, with a message it does not give.
const wrongSuite = `apiVersion: gatehouse.dev/v1alpha1
kind: TestSuite
name: wrong
objects:
- {apiVersion: v1, kind: Namespace, metadata: {name: demo}}
- apiVersion: v1
  kind: PersistentVolume
  metadata: {name: demo-data}
  spec:
    capacity: {storage: 1Gi}
    accessModes: ["ReadWriteOnce"]
    persistentVolumeReclaimPolicy: Delete
    csi: {driver: hostpath.csi.k8s.io, volumeHandle: demo-data}
    claimRef: {namespace: demo, name: data}
  status: {phase: Bound}
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {namespace: demo, name: data}
  spec: {accessModes: ["ReadWriteOnce"], volumeName: demo-data, resources: {requests: {storage: 1Gi}}}
  status: {phase: Bound}
tests:
- name: right
  request: {operation: DELETE, kind: Namespace, name: demo}
  expect: {allowed: false, messageContains: ["DELETION BLOCKED"]}
- name: wrong
  request: {operation: DELETE, kind: Namespace, name: demo}
  expect:
    allowed: true
    messageContains: ["a text no denial has"]
`

// TestTestCommandWrongExpectation: a wrong expectation exits 1 and says,
// in each output format, what was expected and what came.
func TestTestCommandWrongExpectation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(file, []byte(wrongSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := gatehouse(t, "test", "-f", file)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"  PASS  right\n",
		"  FAIL  wrong\n",
		"allowed: expected true (allowed), got false (denied) by pvsafe.gatehouse.dev with code 403: ",
		"| DELETION BLOCKED: Namespace 'demo' would lose data permanently.",
		`message: expected to contain "a text no denial has", got `,
		"1/2 tests passed",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the summary lacks %q:\n%s", want, stdout)
		}
	}

	code, stdout, _ = gatehouse(t, "test", "-f", file, "--output", "json")
	var report struct {
		Total, Passed, Failed int
		Suites                []struct {
			Results []struct {
				Name     string
				Passed   bool
				Failures []string
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &report); err != nil || code != 1 {
		t.Fatalf("--output json: exit %d, %v:\n%s", code, err, stdout)
	}
	if report.Total != 2 || report.Passed != 1 || report.Failed != 1 || len(report.Suites) != 1 ||
		len(report.Suites[0].Results) != 2 || report.Suites[0].Results[1].Passed || len(report.Suites[0].Results[1].Failures) != 2 {
		t.Errorf("--output json: %+v; want 2 tests, the second failed on two expectations", report)
	}

	code, stdout, _ = gatehouse(t, "test", "-f", file, "--output", "junit")
	var junit struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Text string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(stdout), &junit); err != nil || code != 1 {
		t.Fatalf("--output junit: exit %d, %v:\n%s", code, err, stdout)
	}
	if junit.Tests != 2 || junit.Failures != 1 || len(junit.Suites) != 1 || len(junit.Suites[0].Cases) != 2 ||
		junit.Suites[0].Cases[1].Failure == nil || !strings.Contains(junit.Suites[0].Cases[1].Failure.Text, "allowed: expected true") {
		t.Errorf("--output junit: %+v; want 2 cases, the second failed with its diff", junit)
	}
}

// TestTestCommandInvalidSuite: a suite that cannot run exits 2 and names
// the line at fault.
func TestTestCommandInvalidSuite(t *testing.T) {
	for name, tc := range map[string]struct{ suite, want string }{
		"unknown field": {
			suite: "apiVersion: gatehouse.dev/v1alpha1\nkind: TestSuite\ntests:\n- name: x\n  request: {operation: DELETE, kind: Namespace, name: x}\n  expect: {allowed: true, denied: false}\n",
			want:  "line 6: field denied not found",
		},
		"wrong version": {
			suite: "apiVersion: gatehouse.dev/v9\nkind: TestSuite\ntests:\n- name: x\n  request: {operation: DELETE, kind: Namespace, name: x}\n  expect: {allowed: true}\n",
			want:  `line 2: apiVersion "gatehouse.dev/v9", kind "TestSuite": want apiVersion gatehouse.dev/v1alpha1, kind TestSuite`,
		},
		"no expectation": {
			suite: "apiVersion: gatehouse.dev/v1alpha1\nkind: TestSuite\ntests:\n- name: x\n  request: {operation: DELETE, kind: Namespace, name: x}\n",
			want:  "line 4: tests[0] (x): expect.allowed is required",
		},
		"unknown module": {
			suite: "apiVersion: gatehouse.dev/v1alpha1\nkind: TestSuite\ntests:\n- name: x\n  module: pvsafety\n  request: {operation: DELETE, kind: Namespace, name: x}\n  expect: {allowed: true}\n",
			want:  `line 5: tests[0] (x): no module "pvsafety"; Gatehouse has pvsafe, nodegroup, placement, configcheck`,
		},
		"no webhook called": {
			suite: "apiVersion: gatehouse.dev/v1alpha1\nkind: TestSuite\nobjects:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\ntests:\n- name: x\n  module: pvsafe\n  request: {operation: DELETE, kind: ConfigMap, name: x}\n  expect: {allowed: true}\n",
			want:  "line 6: tests[0] (x): no webhook of the suite's modules matches DELETE configmaps",
		},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "suite.yaml")
			if err := os.WriteFile(file, []byte(tc.suite), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := gatehouse(t, "test", "-f", file)
			if code != 2 || !strings.Contains(stdout, tc.want) {
				t.Errorf("exit %d, want 2, and a report saying %q:\n%s\n%s", code, tc.want, stdout, stderr)
			}
		})
	}
	if code, _, stderr := gatehouse(t, "test"); code != 2 || !strings.Contains(stderr, "-f is required") {
		t.Errorf("gatehouse test without -f: exit %d, stderr %q; want 2 and the usage error", code, stderr)
	}
}

// TestTestCommandStatesItsConfinement: every run says, in one line of
// standard error, the confinement configcheck's checks run under; with
// --require-confinement a runner that cannot confine fully exits 2 before
// any suite runs, naming what is missing.
func TestTestCommandStatesItsConfinement(t *testing.T) {
	code, stdout, stderr := gatehouse(t, "test", "--require-confinement", "-f", "../../examples/configcheck/config.yaml")
	if code != 0 {
		t.Fatalf("on this kernel (Landlock ABI 6 or later): exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "gatehouse test: configcheck checks and renderings run fully confined (Landlock ABI ") {
		t.Errorf("stderr %q does not state the confinement", stderr)
	}
	if os.Geteuid() == 0 && !strings.Contains(stderr, fmt.Sprintf("; each as a user of its own (%v, group 65534), not root)", sandbox.DefaultProcessUIDs)) {
		t.Errorf("run as root, stderr %q does not say the checks run as users of their own", stderr)
	}
	weak := sandbox.Capabilities{LandlockABI: 0, LandlockReason: "Landlock is built in but not enabled", Seccomp: true}
	line := confinementLine("gatehouse test", weak)
	for _, want := range []string{"less confinement than in a cluster", "Landlock ABI 0", "file confinement", "not enabled", "--require-confinement"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q does not say %q", line, want)
		}
	}
	err := confinementRequired("gatehouse test", weak)
	if err == nil || !strings.Contains(err.Error(), "--require-confinement: this kernel cannot confine") || !strings.Contains(err.Error(), "file confinement") {
		t.Errorf("--require-confinement without Landlock: %v; want a refusal naming what is missing", err)
	}
	if err := confinementRequired("gatehouse test", sandbox.Capabilities{LandlockABI: 1, Seccomp: true}); err != nil {
		t.Errorf("--require-confinement on ABI 1 (Ubuntu 22.04): %v", err)
	}
	// The release's darwin CLI: nothing of configcheck can run, and the
	// line says so rather than promise a weaker confinement.
	darwin := sandbox.Capabilities{Unsupported: "Gatehouse confines processes with Linux's Landlock and seccomp; this is darwin", LandlockReason: "not Linux", SeccompReason: "not Linux"}
	line = confinementLine("gatehouse test", darwin)
	for _, want := range []string{"cannot run here", "this is darwin", "its documents and suites fail", "on Linux"} {
		if !strings.Contains(line, want) {
			t.Errorf("darwin's line %q does not say %q", line, want)
		}
	}
	if strings.Contains(line, "less confinement") {
		t.Errorf("darwin's line %q promises checks that cannot run", line)
	}
	if err := confinementRequired("gatehouse test", darwin); err == nil || !strings.Contains(err.Error(), "cannot run here") {
		t.Errorf("--require-confinement on darwin: %v; want a refusal saying nothing can run", err)
	}
}

// TestASuiteCannotAllowLuaForItself plays a pull request whose suite turns
// Lua on for its config: without --allow-lua on the command line the
// suite cannot run (exit 2, saying why); the job's flag decides.
func TestASuiteCannotAllowLuaForItself(t *testing.T) {
	dir := t.TempDir()
	config, err := os.ReadFile("../../examples/configcheck/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	suite := "apiVersion: gatehouse.dev/v1alpha1\nkind: TestSuite\nconfigChecks:\n- {file: config.yaml, allowLua: true}\n"
	if err := os.WriteFile(filepath.Join(dir, "suite.yaml"), []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := gatehouse(t, "test", "-f", filepath.Join(dir, "suite.yaml"))
	if code != 2 || !strings.Contains(stdout+stderr, "a suite cannot allow Lua for itself") {
		t.Errorf("a suite allowing Lua for itself: exit %d; want 2 and the refusal\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := gatehouse(t, "test", "--allow-lua", "-f", filepath.Join(dir, "suite.yaml")); code != 0 {
		t.Errorf("with --allow-lua from the job: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestTestCommandSuiteAttacksAtEveryLandlockLevel plays a pull request on a
// CI runner whose job allows Lua (its platform's HAProxy needs it) and holds
// a secret in its environment, at the Landlock levels runners have
// (--sandbox-landlock-abi; 6 is this kernel's). The suite's config loads
// Lua that reads /etc/passwd and the environment of its parent process
// (gatehouse test, with the job's secret) into its failure message, writes
// a file outside its directory and starts a shell. Without Landlock the
// Lua is refused before anything runs (only Landlock confines files) and
// --require-confinement refuses the job; at ABI 1 and 4 the Lua runs and
// each attempt is refused; nothing the job holds reaches the report.
func TestTestCommandSuiteAttacksAtEveryLandlockLevel(t *testing.T) {
	secret := "GATEHOUSE_CI_SECRET=s3cret-" + fmt.Sprint(os.Getpid())
	marker := filepath.Join(os.TempDir(), "gatehouse-suite-level-"+fmt.Sprint(os.Getpid()))
	t.Cleanup(func() { _ = os.Remove(marker); _ = os.Remove(marker + "-exec") })
	attack, err := os.ReadFile("../../internal/configcheck/testdata/lua-attack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := strings.ReplaceAll(string(attack), "MARKER", marker)
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, level := range []int{0, 1, 4, 6} {
		t.Run(fmt.Sprintf("landlock-abi-%d", level), func(t *testing.T) {
			abi := fmt.Sprintf("--sandbox-landlock-abi=%d", level)
			code, stdout, stderr := gatehouseWithEnv(t, []string{secret}, "test", "--allow-lua", abi, "-f", file)
			all := stdout + stderr
			if strings.Contains(all, "s3cret-") || strings.Contains(all, "root:") || strings.Contains(all, "READ:") || strings.Contains(all, "ENVIRON:") {
				t.Errorf("the suite read what the job holds:\n%s", all)
			}
			for _, path := range []string{marker, marker + "-exec"} {
				if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the suite's Lua wrote outside its directory or ran a process: %s exists (%v)", path, err)
				}
			}
			wantLine := fmt.Sprintf("(Landlock ABI %d", level)
			if level == 6 {
				wantLine = "fully confined (Landlock ABI "
			}
			if !strings.Contains(stderr, wantLine) {
				t.Errorf("stderr %q does not state the level in force (%s)", stderr, wantLine)
			}
			if level == 0 {
				if code == 0 || !strings.Contains(all, "no Landlock") {
					t.Errorf("Lua without Landlock: exit %d; want the config refused before anything runs\n%s", code, all)
				}
				code, _, stderr := gatehouseWithEnv(t, []string{secret}, "test", "--allow-lua", "--require-confinement", abi, "-f", file)
				if code != 2 || !strings.Contains(stderr, "--require-confinement: this kernel cannot confine") {
					t.Errorf("--require-confinement without Landlock: exit %d, stderr %q; want 2 and the refusal", code, stderr)
				}
				return
			}
			// The Lua ends with an error of its own: its words show it
			// ran, every attempt before it refused.
			if code != 1 || !strings.Contains(all, "LUA-RAN") {
				t.Errorf("exit %d; want 1 with the Lua's own error (it ran, confined)\n%s", code, all)
			}
			if code, stdout, stderr := gatehouse(t, "test", "--require-confinement", abi, "-f", "../../examples/configcheck/config.yaml"); code != 0 {
				t.Errorf("--require-confinement at ABI %d: exit %d\n%s\n%s", level, code, stdout, stderr)
			}
		})
	}
}

// TestOfflineChecksDropRoot: run as root (CI runs the tests as root, as
// many CI jobs run), the offline commands start every confined process
// under a user of its own, neither root nor the runner's nobody: native
// code in a check holds no user id of the machine's root processes, which
// the kernel would let it act on, nor of root's files.
func TestOfflineChecksDropRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test plays `gatehouse test` run as root, which needs root (CI runs the tests as root); it fails rather than skips so that an unprivileged run cannot pass it silently")
	}
	undo, err := checksUnprivileged(t.Context(), "gatehouse test", io.Discard, true)
	if err != nil {
		t.Fatal(err)
	}
	defer undo()
	cmd, err := sandbox.Command(t.Context(), sandbox.Spec{Path: "/usr/bin/id", Args: []string{"-u"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.Output()
	uid, convErr := strconv.Atoi(strings.TrimSpace(string(out)))
	if u := sandbox.DefaultProcessUIDs; err != nil || convErr != nil || uid < u.First || uid >= u.First+u.Count {
		t.Errorf("a confined process of the offline commands runs as %q (%v): want a user of %v", out, err, sandbox.DefaultProcessUIDs)
	}
}
