package suite

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestMessageFormat(t *testing.T) {
	runner, _ := demoRunner(t)
	tests := map[string]Test{
		"backend-exists": {Fixtures: demoFixtures(t), Assertions: []Assertion{
			{Type: TypeContains, Description: "the ghost backend is rendered", Pattern: `be_ghost`},
			{Type: TypeMatchCount, Pattern: `(?m)^backend `, Expected: "3"},
		}},
		"missing-service": {Fixtures: ghostFixtures(t), Assertions: []Assertion{{Type: TypeHAProxyValid}}},
		"passes":          {Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeHAProxyValid}}},
	}
	report, err := runner.Run(context.Background(), tests, "")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`Validation tests failed: 2/3 tests failed

Failed tests:

- Test: backend-exists
  Assertion failed: the ghost backend is rendered - pattern "be_ghost" not found in haproxy.cfg (%d bytes)
  Assertion failed: match_count - expected 3 matches of "(?m)^backend " in haproxy.cfg, got 2

- Test: missing-service
  Rendering failed: ingress app/web: service ghost not found`, len(demoConfig))
	if got := report.Message(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestMessageEmptyWhenPassed(t *testing.T) {
	report := Report{Results: []Result{{Name: "a", Passed: true}}, Total: 1}
	if got := report.Message(); got != "" {
		t.Errorf("Message() = %q, want empty", got)
	}
	if got := (Report{}).Message(); got != "" {
		t.Errorf("Message() of no tests = %q, want empty", got)
	}
}

func TestMessageIndentsMultilineTexts(t *testing.T) {
	report := Report{Total: 1, Failed: 1, Results: []Result{{
		Name:     "a",
		Failures: []Failure{{Assertion: TypeHAProxyValid, Message: "HAProxy validation failed: → [ALERT] (1) : config : parsing [haproxy.cfg:3]\nConfig context:\n     3 → server s1 :80\n"}},
	}}}
	want := `Validation tests failed: 1/1 tests failed

Failed tests:

- Test: a
  Assertion failed: haproxy_valid - HAProxy validation failed: → [ALERT] (1) : config : parsing [haproxy.cfg:3]
    Config context:
         3 → server s1 :80`
	if got := report.Message(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestMessageIsBounded(t *testing.T) {
	long := strings.Repeat("x", 1000)
	t.Run("many failed tests", func(t *testing.T) {
		var report Report
		for i := range 200 {
			report.Results = append(report.Results, Result{
				Name:        fmt.Sprintf("test-%03d", i),
				RenderError: long,
				Failures:    []Failure{{Assertion: long, Message: long}},
			})
		}
		report.Results = append(report.Results, Result{Name: "passes", Passed: true})
		report.Total, report.Failed = 201, 200
		message := report.Message()
		if len(message) > maxMessageBytes {
			t.Fatalf("message of %d bytes, want at most %d", len(message), maxMessageBytes)
		}
		if !strings.HasPrefix(message, "Validation tests failed: 200/201 tests failed\n\nFailed tests:\n\n- Test: test-000\n  Rendering failed: xxx") {
			t.Fatalf("message does not start with the header and the first test:\n%s", message)
		}
		shown := strings.Count(message, "- Test: ")
		if want := fmt.Sprintf("\n\n... and %d more failed tests", 200-shown); !strings.HasSuffix(message, want) {
			t.Fatalf("message does not end with %q:\n%s", want, message[len(message)-200:])
		}
		if shown < 2 {
			t.Fatalf("only %d tests shown", shown)
		}
		if strings.Contains(message, "passes") {
			t.Fatalf("a passed test is in the message")
		}
	})
	t.Run("one test with many failures", func(t *testing.T) {
		result := Result{Name: "a"}
		for i := range 100 {
			result.Failures = append(result.Failures, Failure{Assertion: fmt.Sprintf("assertion %d", i), Message: long})
		}
		report := Report{Total: 2, Failed: 2, Results: []Result{result, {Name: "b", RenderError: "boom"}}}
		message := report.Message()
		if len(message) > maxMessageBytes {
			t.Fatalf("message of %d bytes, want at most %d", len(message), maxMessageBytes)
		}
		shown := strings.Count(message, "  Assertion failed: ")
		// b's short block still fits after a's cut list.
		if !strings.Contains(message, fmt.Sprintf("\n  ... and %d more failed assertions\n", 100-shown)) ||
			!strings.HasSuffix(message, "\n\n- Test: b\n  Rendering failed: boom") {
			t.Fatalf("message does not say what it left out:\n%s", message)
		}
		if !strings.Contains(message, "  Assertion failed: assertion 0 - "+strings.Repeat("x", maxFailureMessage-len("…"))+"…\n") {
			t.Fatalf("the first failure is not bounded to %d bytes", maxFailureMessage)
		}
	})
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456…"},
		{"ééééé", 8, "éé…"}, // 10 bytes; cut back to a rune start
	}
	for _, tt := range tests {
		if got := truncate(tt.in, tt.n); got != tt.want || len(got) > tt.n {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
