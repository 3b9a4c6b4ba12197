package haproxy

import (
	"os"
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
	for _, v := range []Version{{Branch: "2.6", Full: "2.6.12"}, {Branch: "3.0", Full: "3.0.11-1+deb13u5"}} {
		if err := checkBranch("/usr/sbin/haproxy", v); err != nil {
			t.Errorf("%s refused: %v", v.Full, err)
		}
	}
	err := checkBranch("/usr/local/sbin/haproxy", Version{Branch: "3.2", Full: "3.2.4"})
	if err == nil {
		t.Fatal("haproxy 3.2 accepted: its keywords are not in the policy's tables")
	}
	// Exactly as docs/configcheck.md ("A newer haproxy") shows it, after
	// "configcheck: haproxy checker: ".
	documented := `/usr/local/sbin/haproxy is haproxy 3.2.4, but the check policy covers the configuration grammar of haproxy 2.6, 3.0 only: a newer grammar has keywords the policy does not know and would let through; run haproxy 2.6 or 3.0 (the image's is 3.0), or see "A newer haproxy" in docs/configcheck.md`
	if err.Error() != documented {
		t.Errorf("refusal:\n%s\nwant the documented:\n%s", err, documented)
	}
	doc, rerr := os.ReadFile("../../../docs/configcheck.md")
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !strings.Contains(string(doc), "configcheck: haproxy checker: "+documented+"\n") {
		t.Error("docs/configcheck.md no longer shows the refusal as it is")
	}
	for _, want := range []string{"/usr/local/sbin/haproxy is haproxy 3.2.4", "covers the configuration grammar of haproxy 2.6, 3.0 only", "docs/configcheck.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
}

// TestRunnerReadsTheVersionOfTheBinaryItRuns: this machine's haproxy (2.6)
// is accepted and its version known (the image's 3.0 is
// TestTheImagesHAProxyRunsConfinedFromItsRoot); a program that does not
// say which haproxy it is (here /bin/true) is refused before any check
// runs. (A newer branch's refusal is TestABranchThePolicyDoesNotCoverIsRefused:
// no haproxy of another branch is at hand.)
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

func TestBranchAtLeast(t *testing.T) {
	for _, c := range []struct {
		branch, since string
		want          bool
	}{
		{"2.6", "", true}, {"3.0", "", true}, {"3.0", "3.0", true}, {"2.6", "3.0", false},
		{"3.2", "3.0", true}, {"10.0", "3.0", true}, {"3.0", "2.10", true}, {"2.9", "2.10", false}, {"x", "3.0", false},
	} {
		if got := branchAtLeast(c.branch, c.since); got != c.want {
			t.Errorf("branchAtLeast(%q, %q) = %v, want %v", c.branch, c.since, got, c.want)
		}
	}
}
