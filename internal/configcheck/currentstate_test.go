package configcheck

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

func TestDecideCurrentState(t *testing.T) {
	key := spec.GatehouseKey(types.NamespacedName{Namespace: "lb", Name: "edge"})
	failure := judge.Verdict{Denial: judge.HAProxyRejects + "\n[ALERT] config : parsing [haproxy.cfg:7] : 'timeout server' expects an integer\n  line 7: timeout server abc", Phase: judge.PhaseHAProxy}
	for _, tt := range []struct {
		name  string
		v     judge.Verdict
		empty []string
		proof string
		// failsAlready answers whether the stored config fails the same
		// way; nil: the outcome is known without asking.
		failsAlready func() bool
		// want: "" admitted silently, "warn:<text>", "deny:<text>", "undecided:<text>"
		want []string
	}{
		{name: "renders", v: judge.Verdict{}, want: nil},
		{name: "no time", v: judge.Verdict{Undecided: "configcheck: rendering did not finish"},
			want: []string{"undecided:rendering did not finish", "undecided:current state"}},
		{name: "fails with objects", v: failure, failsAlready: func() bool { return false },
			want: []string{"deny:the config's rendering of the cluster's current state fails", "deny:timeout server abc"}},
		{name: "fails with objects, a test proves nothing then", v: failure, proof: "ok", failsAlready: func() bool { return false },
			want: []string{"deny:current state fails"}},
		{name: "fails without objects and without proof", v: judge.Verdict{Denial: "no Ingress yet", Phase: judge.PhaseRender}, empty: []string{"ingresses"},
			failsAlready: func() bool { return false },
			want:         []string{"deny:no Ingress yet", "deny:watched resource ingresses selects no object yet", "deny:asserts haproxy_valid"}},
		{name: "waits for objects", v: judge.Verdict{Denial: "no Ingress yet", Phase: judge.PhaseRender}, empty: []string{"ingresses"}, proof: "ok-single-ingress",
			want: []string{"warn:HAProxyTemplateConfig lb/edge does not render the cluster's current state yet", "warn:: no Ingress yet",
				`warn:watched resource ingresses selects no object yet and test "ok-single-ingress"`}},
		{name: "an alert's first line is quoted", v: failure, empty: []string{"ingresses"}, proof: "ok",
			want: []string{"warn:yet, so nothing is published until it does (condition Published): [ALERT] config : parsing [haproxy.cfg:7]"}},
		{name: "the stored config fails the same way", v: failure, failsAlready: func() bool { return true },
			want: []string{"warn:HAProxyTemplateConfig lb/edge fails without this change too", "warn:the failure: [ALERT]"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			failsAlready := tt.failsAlready
			if failsAlready == nil {
				failsAlready = func() bool {
					t.Error("the stored config was rendered although the outcome was known")
					return false
				}
			}
			got := decideCurrentState(key, tt.v, tt.empty, tt.proof, failsAlready)
			if len(tt.want) == 0 && (got.denial != "" || got.undecided != "" || len(got.warnings) > 0) {
				t.Fatalf("got %+v, want a silent admission", got)
			}
			for _, w := range tt.want {
				kind, text, _ := strings.Cut(w, ":")
				var in string
				switch kind {
				case "warn":
					in = strings.Join(got.warnings, "\n")
					if got.denial != "" || got.undecided != "" {
						t.Errorf("not admitted: %+v", got)
					}
				case "deny":
					in = got.denial
				case "undecided":
					in = got.undecided
				}
				if !strings.Contains(in, text) {
					t.Errorf("%s %q lacks %q (got %+v)", kind, in, text, got)
				}
			}
			for _, w := range got.warnings {
				if len(w) > 250 || strings.Contains(w, "\n") {
					t.Errorf("warning not one bounded line: %q", w)
				}
			}
		})
	}
}

func TestValidTest(t *testing.T) {
	c := &spec.Compiled{Tests: map[string]suite.Test{
		"negative": {Assertions: []suite.Assertion{{Type: "contains", Target: "rendering_error"}}},
		"valid":    {Assertions: []suite.Assertion{{Type: "contains"}, {Type: suite.TypeHAProxyValid}}},
		"failing":  {Assertions: []suite.Assertion{{Type: suite.TypeHAProxyValid}}},
	}}
	report := suite.Report{Results: []suite.Result{
		{Name: "failing", Passed: false},
		{Name: "negative", Passed: true},
		{Name: "valid", Passed: true},
	}}
	if got := validTest(c, report); got != "valid" {
		t.Errorf("validTest = %q, want valid (the only passing test asserting haproxy_valid)", got)
	}
	report.Results[2].Passed = false
	if got := validTest(c, report); got != "" {
		t.Errorf("validTest = %q with no passing haproxy_valid test", got)
	}
}
