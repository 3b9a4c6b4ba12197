package module

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func TestWarnModeKeepsWarningsWithinTheAPIServersLimits(t *testing.T) {
	var lines []string
	for i := range 500 {
		lines = append(lines, fmt.Sprintf("  - claim-%04d: %s", i, strings.Repeat("x", 300)))
	}
	d := Warn.Apply("pvsafe", DecisionOf(admission.Denied(strings.Join(lines, "\n"))))
	resp := d.Response
	if d.Class != ClassWarned || !resp.Allowed {
		t.Fatalf("warn mode did not admit: %+v", resp)
	}
	total := 0
	for _, w := range resp.Warnings {
		if len(w) > maxWarningLength {
			t.Fatalf("a warning of %d characters: %q", len(w), w)
		}
		total += len(w)
	}
	if total > maxWarningsTotal {
		t.Fatalf("warnings total %d bytes", total)
	}
	last := resp.Warnings[len(resp.Warnings)-1]
	if !strings.HasPrefix(last, "... ") || !strings.Contains(last, "more lines of the denial left out") {
		t.Fatalf("the last warning should say how much was left out: %q", last)
	}
	if resp.Warnings[0] != "pvsafe (enforcement: warn) would deny this request:" || !strings.HasPrefix(resp.Warnings[1], "  - claim-0000: xxx") {
		t.Fatalf("warnings: %q", resp.Warnings[:2])
	}
}

func TestUndecidedIsNotADenial(t *testing.T) {
	resp := Undecided("queue too long")
	if ClassOf(resp) != ClassUndecided || resp.Allowed {
		t.Fatalf("Undecided: %+v", resp)
	}
	if d := Warn.Apply("configcheck", DecisionOf(resp)); d.Class != ClassUndecided || d.Response.Allowed {
		t.Fatal("warn mode turned a failure to decide into an admission")
	}
	if ClassOf(admission.Denied("no")) == ClassUndecided {
		t.Fatal("a denial taken for undecided")
	}
}

// TestWarnModeNeverRelaxesNotPermitted: warn mode is for rolling out a
// policy; a denial because the requester lacks a right stays a denial.
func TestWarnModeNeverRelaxesNotPermitted(t *testing.T) {
	d := Warn.Apply("configcheck", DecisionOf(NotPermitted("user \"alice\" may not list secrets cluster-wide")))
	if resp := d.Response; d.Class != ClassNotPermitted || resp.Allowed || resp.Result.Code != 403 {
		t.Fatalf("warn mode turned a NotPermitted denial into %+v (class %s)", resp, d.Class)
	}
	if d := Warn.Apply("configcheck", DecisionOf(admission.Denied("a policy denial"))); d.Class != ClassWarned || !d.Response.Allowed {
		t.Fatalf("warn mode did not relax a policy denial: %+v", d.Response)
	}
}

// TestWarningsAreCutOnCharacterBoundaries: a long line of a denial in
// another script is cut whole characters at a time (kubectl prints the
// warning; half a character would print as garbage).
func TestWarningsAreCutOnCharacterBoundaries(t *testing.T) {
	line := "  - " + strings.Repeat("é", 400) // two bytes each
	d := Warn.Apply("pvsafe", DecisionOf(admission.Denied(line)))
	w := d.Response.Warnings[1]
	if !utf8.ValidString(w) || len(w) > maxWarningLength || !strings.HasSuffix(w, "é...") {
		t.Fatalf("warning %q (%d bytes, valid UTF-8 %v)", w, len(w), utf8.ValidString(w))
	}
}
