package configcheck

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// ingressFixture is a test fixture of judgeSpec's ingresses: one frontend
// line.
func ingressFixture(name, line string) apiextensionsv1.JSON {
	return apiextensionsv1.JSON{Raw: []byte(`{"metadata":{"name":"` + name + `","namespace":"app"},"spec":{"line":"` + line + `"}}`)}
}

// TestCheckWithoutState plays the configs of the finding on a Gatehouse
// that cannot verify its callers: each ran its tests and was admitted,
// whatever its rendering. Now the config is rendered over empty watched
// resources and its tests' fixtures, as admitConfig does (its tests run,
// their renderings kept, then checkWithoutState), with the real haproxy.
func TestCheckWithoutState(t *testing.T) {
	key := spec.GatehouseKey(types.NamespacedName{Namespace: "team", Name: "edge"})
	// needsAnIngress fails without an Ingress, as a config routing to
	// the first one would.
	const needsAnIngress = `{{ if not .resources.ingresses.List }}{{ fail "no Ingress yet" }}{{ end }}`
	passing := func(name, line string, assertion gatehousev1alpha1.Assertion) map[string]gatehousev1alpha1.ValidationTest {
		return map[string]gatehousev1alpha1.ValidationTest{name: {
			Fixtures:   map[string][]apiextensionsv1.JSON{"ingresses": {ingressFixture("web", line)}},
			Assertions: []gatehousev1alpha1.Assertion{assertion},
		}}
	}
	contains := gatehousev1alpha1.Assertion{Type: "contains", Pattern: "frontend fe_http"}
	for _, tt := range []struct {
		name   string
		change func(*gatehousev1alpha1.HAProxyTemplateConfigSpec)
		// want: "" admitted silently, "warn:<text>", "deny:<text>"
		want []string
	}{
		{name: "a valid config is admitted", change: func(*gatehousev1alpha1.HAProxyTemplateConfigSpec) {}},
		{name: "timeout server abc, no tests", change: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.HAProxyConfig.Template = strings.Replace(s.HAProxyConfig.Template, "timeout server 30s", "timeout server abc", 1)
		}, want: []string{"deny:" + withoutStatePrefix, "deny:its rendering of empty watched resources fails: haproxy -c rejects", "deny:timeout server"}},
		{name: "a template that always calls fail", change: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.HAProxyConfig.Template += `{{ fail "this config never renders" }}`
		}, want: []string{"deny:cannot verify that this request came from the API server", "deny:empty watched resources fails: this config never renders"}},
		{name: "fails without objects, no test shows it renders with them", change: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.HAProxyConfig.Template = needsAnIngress + s.HAProxyConfig.Template
		}, want: []string{"deny:no Ingress yet", "deny:add a validation test whose fixtures hold them"}},
		{name: "fails without objects, a text-only test renders a valid configuration", change: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.HAProxyConfig.Template = needsAnIngress + s.HAProxyConfig.Template
			s.ValidationTests = passing("one-ingress", "http-request set-header X-A a", contains)
		}, want: []string{"warn:HAProxyTemplateConfig team/edge does not render without watched objects", "warn:: no Ingress yet",
			`warn:admitted because test "one-ingress" renders a configuration haproxy -c accepts`}},
		{name: "a test whose assertions pass but whose rendering haproxy rejects", change: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.ValidationTests = passing("bad-line", "no_such_keyword here", contains)
		}, want: []string{"deny:" + withoutStatePrefix, `deny:the config's rendering of test "bad-line"'s fixtures fails`, "deny:no_such_keyword"}},
		{name: "a negative test's fixtures are not checked", change: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.ValidationTests = passing("refusal", "no_such_keyword here",
				gatehousev1alpha1.Assertion{Type: "not_contains", Target: "rendering_error", Pattern: "never"})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfgSpec := judgeSpec()
			tt.change(cfgSpec)
			c, errs := spec.Compile(cfgSpec, inProcess)
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			m := &Module{checker: testChecker(t, nil)}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			kept := keptRenderings{}
			report, err := m.runTestsKeeping(ctx, c, 20*time.Second, kept.keep)
			if err != nil || report.Failed > 0 {
				t.Fatalf("the tests fail (%v): %s", err, report.Message())
			}
			got := m.checkWithoutState(ctx, key, c, kept)
			if got.undecided != "" {
				t.Fatalf("undecided: %s", got.undecided)
			}
			if len(tt.want) == 0 && (got.denial != "" || len(got.warnings) > 0) {
				t.Fatalf("got %+v, want a silent admission", got)
			}
			for _, w := range tt.want {
				kind, text, _ := strings.Cut(w, ":")
				in := got.denial
				if kind == "warn" {
					in = strings.Join(got.warnings, "\n")
					if got.denial != "" {
						t.Errorf("refused: %s", got.denial)
					}
				}
				if !strings.Contains(in, text) {
					t.Errorf("%s %q lacks %q", kind, in, text)
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

func TestDecideWithoutStateUndecided(t *testing.T) {
	got := decideWithoutState(spec.GatehouseKey(types.NamespacedName{Namespace: "a", Name: "b"}), judge.Verdict{Undecided: "configcheck: rendering did not finish"}, "proof")
	if !strings.Contains(got.undecided, "rendering did not finish") || got.denial != "" || len(got.warnings) > 0 {
		t.Fatalf("got %+v, want undecided", got)
	}
}

// TestUnverifiedShareIsNeverTheAPIServers: the checks of an unverified
// review wait in the class of reviews nobody vouches for, and never in the
// party of the namespace's verified authors.
func TestUnverifiedShareIsNeverTheAPIServers(t *testing.T) {
	party, class := unverifiedShare("team")
	if class != fair.DryRun {
		t.Errorf("class %v, want %v", class, fair.DryRun)
	}
	if party == guard.AuthorParty("team") {
		t.Errorf("party %q is the verified authors'", party)
	}
}

// TestExampleConfigIsAdmittedWithoutState: the example every default
// install is shown (examples/configcheck) passes the check a config gets
// from a caller Gatehouse cannot verify.
func TestExampleConfigIsAdmittedWithoutState(t *testing.T) {
	cfg := loadExample(t)
	c, errs := spec.Compile(&cfg.Spec, inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	m := &Module{checker: testChecker(t, nil)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kept := keptRenderings{}
	report, err := m.runTestsKeeping(ctx, c, time.Minute, kept.keep)
	if err != nil || report.Failed > 0 {
		t.Fatalf("the example's tests fail (%v): %s", err, report.Message())
	}
	if len(kept) == 0 {
		t.Fatal("no test rendering was kept: nothing checked over fixtures")
	}
	got := m.checkWithoutState(ctx, spec.GatehouseKey(types.NamespacedName{Namespace: "lb-system", Name: "edge"}), c, kept)
	if got.denial != "" || got.undecided != "" {
		t.Fatalf("the example is refused: %+v", got)
	}
	t.Logf("warnings: %q", got.warnings)
}

func TestUnverifiedWarningIsNotCut(t *testing.T) {
	// kube-apiserver may cut a warning past 256 bytes.
	if n := len(unverifiedWarning); n > 256 {
		t.Errorf("unverifiedWarning is %d bytes", n)
	}
}
