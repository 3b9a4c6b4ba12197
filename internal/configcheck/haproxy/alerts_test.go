package haproxy

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseAlertsKeepsEveryAlert(t *testing.T) {
	long := strings.Repeat("b", 1503)
	var out strings.Builder
	out.WriteString("[NOTICE]   (7) : haproxy version is 2.6.12\n")
	for i := range 3 {
		fmt.Fprintf(&out, "[ALERT]    (7) : config : Parsing [haproxy.cfg:%d]: backend '%s' has the same name as backend '%s' declared at haproxy.cfg:12.\n", 20+i, long, long)
	}
	out.WriteString("[ALERT]    (7) : config : parsing [haproxy.cfg:40] : first\n    | second\n")
	out.WriteString("[WARNING]  (7) : config : a warning is no failure\n")
	out.WriteString("[ALERT]    (7) : config : Error(s) found in configuration file : haproxy.cfg\n")
	out.WriteString("[ALERT]    (7) : config : Fatal errors found in configuration.\n")

	a := ParseAlerts(out.String())
	if !a.Complete() || len(a.Keys) != 4 {
		t.Fatalf("got %d alerts (complete %v), want 4: three duplicates and one with a continuation; summaries and warnings are not alerts", len(a.Keys), a.Complete())
	}
	// The text Simplify makes for a person is bounded and says alerts were
	// left out; the alerts are not.
	if msg := Simplify(out.String(), ""); !strings.Contains(msg, "more alerts not shown") {
		t.Fatalf("the message is expected to be cut here (the attack's 1,503-character names): %q", msg)
	}
	if a.Keys[0] != a.Keys[1] || a.Keys[1] != a.Keys[2] {
		t.Fatal("the same alert on other lines is the same alert")
	}
	if a.Keys[3] != KeyOf("config : parsing [haproxy.cfg:99] : first\n| second") {
		t.Fatal("a continuation line belongs to its alert")
	}
}

func TestParseAlertsBoundsByCount(t *testing.T) {
	var out strings.Builder
	for i := range MaxAlerts + 5 {
		fmt.Fprintf(&out, "[ALERT] (1) : config : parsing [haproxy.cfg:%d] : problem %d\n", i+1, i)
	}
	a := ParseAlerts(out.String())
	if len(a.Keys) != MaxAlerts || a.LeftOut != 5 || a.Complete() {
		t.Fatalf("kept %d, left out %d, complete %v; want %d, 5, false", len(a.Keys), a.LeftOut, a.Complete(), MaxAlerts)
	}
	if ParseAlerts("[ALERT] (1) : config : x\n" + outputTruncated).Complete() {
		t.Fatal("an output cut at maxOutput may hide alerts")
	}
}

func TestAlertsWithin(t *testing.T) {
	k := func(s string) AlertKey { return KeyOf(s) }
	dup, other := k("backend 'x' has the same name"), k("unknown keyword 'y'")
	of := func(keys ...AlertKey) Alerts { return Alerts{Keys: keys} }
	cases := []struct {
		name   string
		a, b   Alerts
		within bool
		fewer  bool
	}{
		{"the same", of(dup, dup), of(dup, dup), true, false},
		{"one of two alike", of(dup), of(dup, dup), true, true},
		{"one more alike", of(dup, dup, dup), of(dup, dup), false, false},
		{"a new one", of(dup, other), of(dup, dup), false, false},
		{"none", of(), of(dup), true, true},
		{"left out", Alerts{Keys: []AlertKey{dup}, LeftOut: 1}, of(dup, dup), false, false},
		{"of a list left out", of(dup), Alerts{Keys: []AlertKey{dup, dup}, LeftOut: 1}, false, false},
	}
	for _, tc := range cases {
		if got := tc.a.Within(tc.b); got != tc.within {
			t.Errorf("%s: Within = %v", tc.name, got)
		}
		if got := tc.a.Fewer(tc.b); got != tc.fewer {
			t.Errorf("%s: Fewer = %v", tc.name, got)
		}
	}
	if KeyOf("parsing [haproxy.cfg:10] : x declared at haproxy.cfg:3, line 4") != KeyOf("parsing [haproxy.cfg:11] : x declared at haproxy.cfg:9, line 5") {
		t.Fatal("line numbers are not part of what an alert is")
	}
	if KeyOf("parsing [haproxy.cfg:10] : x") == KeyOf("parsing [haproxy.cfg:10] : y") {
		t.Fatal("different alerts")
	}
}
