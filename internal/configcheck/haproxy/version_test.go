package haproxy

import (
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		output, branch, full string
	}{
		{"HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\nStatus: long-term supported branch\n", "2.6", "2.6.12-1+deb12u4"},
		{"HA-Proxy version 1.8.19 2019/02/11\n", "1.8", "1.8.19"},
		{"HAProxy version 3.2.4-98813a1 2025/08/13 - https://haproxy.org/\n", "3.2", "3.2.4-98813a1"},
	} {
		v, err := parseVersion(c.output)
		if err != nil || v.Branch != c.branch || v.Full != c.full {
			t.Errorf("parseVersion(%q) = %+v, %v; want %s, %s", c.output, v, err, c.branch, c.full)
		}
	}
	if _, err := parseVersion("usage: haproxy\n"); err == nil {
		t.Error("an output without a version was read as one")
	}
}

func TestABranchThePolicyDoesNotCoverIsRefused(t *testing.T) {
	if err := checkBranch("/usr/sbin/haproxy", Version{Branch: "2.6", Full: "2.6.12"}); err != nil {
		t.Errorf("2.6 refused: %v", err)
	}
	err := checkBranch("/usr/local/sbin/haproxy", Version{Branch: "3.2", Full: "3.2.4"})
	if err == nil {
		t.Fatal("haproxy 3.2 accepted: its keywords are not in the policy's tables")
	}
	for _, want := range []string{"/usr/local/sbin/haproxy is haproxy 3.2.4", "covers the configuration grammar of haproxy 2.6", "docs/configcheck.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
}

// TestRunnerReadsTheVersionOfTheBinaryItRuns: the real haproxy (2.6, as
// the image's) is accepted and its version known; a program that does not
// say which haproxy it is (here /bin/true) is refused before any check
// runs. (A newer branch's refusal is TestABranchThePolicyDoesNotCoverIsRefused:
// the sandbox runs ELF programs only, and this machine has one haproxy.)
func TestRunnerReadsTheVersionOfTheBinaryItRuns(t *testing.T) {
	r, err := NewRunner(RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Version().Branch != "2.6" {
		t.Errorf("the runner reads haproxy %+v; this machine's is 2.6", r.Version())
	}
	if _, err := NewRunner(RunnerOptions{Binary: "/bin/true"}); err == nil || !strings.Contains(err.Error(), "no version in its -v output") {
		t.Errorf("/bin/true as haproxy: %v; want refused, saying it has no version", err)
	}
}
