package haproxy

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// The check policy (policy.go, policy_files.go) refuses what a rendering
// must never make haproxy do, by keyword and by how haproxy reads nested
// files. Both are written for one branch's grammar: a newer haproxy has
// keywords the tables do not know (a new way to load code, read a file,
// open a socket), and it would accept them unchecked. So the runner reads
// `haproxy -v` once and refuses a branch the policy was not reviewed for:
// configcheck then fails to start, alone, and says why.
//
// Supporting another branch is a review, not a flag: go through that
// branch's configuration manual for keywords that load code, read files,
// open sockets or run programs, and through its crt-list and map readers,
// extend the tables and their tests, then add the branch here
// (docs/configcheck.md, "A newer haproxy"). 3.0 was reviewed on 2026-12-03
// against 3.0.11's manual and v3.0.0's sources (the entries with since
// "3.0" in policy_keywords.go).
var PolicyBranches = []string{"2.6", "3.0"}

// branchAtLeast reports whether branch ("3.0") is since or newer; an
// empty since is the oldest covered branch.
func branchAtLeast(branch, since string) bool {
	if since == "" {
		return true
	}
	var bMajor, bMinor, sMajor, sMinor int
	if _, err := fmt.Sscanf(branch, "%d.%d", &bMajor, &bMinor); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(since, "%d.%d", &sMajor, &sMinor); err != nil {
		return false
	}
	return bMajor > sMajor || bMajor == sMajor && bMinor >= sMinor
}

// versionTimeout bounds `haproxy -v`, which answers at once.
const versionTimeout = 30 * time.Second

var versionLine = regexp.MustCompile(`(?m)^HA-?Proxy version (\d+)\.(\d+)(\S*)`)

// Version is what `haproxy -v` says of itself.
type Version struct {
	// Branch is major.minor ("2.6"); Full the whole version ("2.6.12-1+deb12u4").
	Branch, Full string
}

// parseVersion reads the version from `haproxy -v`'s output.
func parseVersion(output string) (Version, error) {
	m := versionLine.FindStringSubmatch(output)
	if m == nil {
		return Version{}, fmt.Errorf("no version in its -v output %q", bound(strings.TrimSpace(output), 200))
	}
	return Version{Branch: m[1] + "." + m[2], Full: m[1] + "." + m[2] + m[3]}, nil
}

// checkBranch refuses a branch the policy does not cover.
func checkBranch(binary string, v Version) error {
	if slices.Contains(PolicyBranches, v.Branch) {
		return nil
	}
	return fmt.Errorf("%s is haproxy %s, but the check policy covers the configuration grammar of haproxy %s only: "+
		"a newer grammar has keywords the policy does not know and would let through; "+
		"run haproxy %s (the image's is 3.0), or see \"A newer haproxy\" in docs/configcheck.md",
		binary, v.Full, strings.Join(PolicyBranches, ", "), strings.Join(PolicyBranches, " or "))
}

// readVersion runs `binary -v`, confined as the checks are.
func (r *ProcessRunner) readVersion(ctx context.Context) (Version, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	dir, err := os.MkdirTemp(r.opts.TempDir, "gatehouse-haproxy-version-*")
	if err != nil {
		return Version{}, err
	}
	defer os.RemoveAll(dir)
	if err := sandbox.ShareDir(dir); err != nil {
		return Version{}, err
	}
	cmd, err := r.opts.Confinement.command(ctx, r.opts.Root, r.opts.Binary, []string{"-v"}, dir)
	if err != nil {
		return Version{}, err
	}
	var output limitedBuffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	cmd.WaitDelay = waitDelay
	if err := cmd.Run(); err != nil {
		return Version{}, fmt.Errorf("%s -v: %w (output %q)", r.opts.Binary, err, bound(strings.TrimSpace(output.String()), 200))
	}
	return parseVersion(output.String())
}
