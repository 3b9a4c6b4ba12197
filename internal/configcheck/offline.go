package configcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

// OfflineOptions are the flags of `gatehouse configcheck test`.
type OfflineOptions struct {
	// Test runs this test alone ("" runs all).
	Test string
	// Output is summary (default) or json.
	Output string
	// DumpRendered, when set, receives each test's rendering under
	// <dir>/<test>/ (haproxy.cfg, maps/, general/, ssl/).
	DumpRendered  string
	HAProxyBinary string
	// HAProxyRoot is an unpacked root file system haproxy runs from
	// (Options.HAProxyRoot).
	HAProxyRoot string
	// AllowLua applies the check policy as a cluster with
	// --configcheck-allow-lua would.
	AllowLua bool
}

// TestOffline runs the embedded tests of the HAProxyTemplateConfig in
// configYAML with the engine and haproxy -c the webhook uses, without a
// cluster, and writes the report to w. It reports whether every test passed;
// an error means the tests could not run (the config does not compile, say).
func TestOffline(ctx context.Context, configYAML []byte, opts OfflineOptions, w io.Writer) (bool, error) {
	if opts.Output != "" && opts.Output != "summary" && opts.Output != "json" {
		return false, fmt.Errorf("--output %q: want summary or json", opts.Output)
	}
	report, err := RunOffline(ctx, configYAML, opts)
	if err != nil {
		return false, err
	}
	switch opts.Output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(jsonReport(report)); err != nil {
			return false, err
		}
	case "", "summary":
		writeSummary(w, report)
	}
	return report.Failed == 0, nil
}

// RunOffline runs the embedded tests of the HAProxyTemplateConfig in
// configYAML as TestOffline does and returns their report (Output is not
// read): `gatehouse test` reports them beside its suites. An error means
// the tests could not run.
func RunOffline(ctx context.Context, configYAML []byte, opts OfflineOptions) (suite.Report, error) {
	// Gatehouse's kind, or haptic's read as it is (spec.CompileHaptic).
	var kind metav1.TypeMeta
	if err := yaml.Unmarshal(configYAML, &kind); err != nil {
		return suite.Report{}, fmt.Errorf("reading the config: %w", err)
	}
	var compileIt func(m *Module) (*spec.Compiled, field.ErrorList)
	switch kind.APIVersion {
	case hapticv1alpha1.GroupVersion.String():
		cfg := &hapticv1alpha1.HAProxyTemplateConfig{}
		if err := yaml.UnmarshalStrict(configYAML, cfg); err != nil {
			return suite.Report{}, fmt.Errorf("reading the haptic config: %w", err)
		}
		compileIt = func(m *Module) (*spec.Compiled, field.ErrorList) {
			return spec.CompileHaptic(&cfg.Spec, m.compiler(ctx))
		}
	default:
		cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := yaml.UnmarshalStrict(configYAML, cfg); err != nil {
			return suite.Report{}, fmt.Errorf("reading the config: %w", err)
		}
		compileIt = func(m *Module) (*spec.Compiled, field.ErrorList) { return spec.Compile(&cfg.Spec, m.compiler(ctx)) }
	}
	renders, err := newRenderPool(Options{}.withDefaults())
	if err != nil {
		return suite.Report{}, err
	}
	defer renders.Close()
	root := opts.HAProxyRoot
	if root != "" && !filepath.IsAbs(root) {
		// A command line's path is the shell's: relative to the working
		// directory (the server's flag stays absolute).
		if root, err = filepath.Abs(root); err != nil {
			return suite.Report{}, err
		}
	}
	checker, err := newChecker(root, opts.HAProxyBinary, opts.AllowLua, 0)
	if err != nil {
		return suite.Report{}, err
	}
	m := &Module{checker: checker, renders: renders}
	c, errs := compileIt(m)
	if len(errs) > 0 {
		return suite.Report{}, fmt.Errorf("the config is invalid: %w", errs.ToAggregate())
	}
	runner := judge.TestRunner(m.checker, c)
	if opts.DumpRendered != "" {
		runner.OnRendered = func(test string, out render.Output) {
			if err := dumpRendering(filepath.Join(opts.DumpRendered, test), out); err != nil {
				fmt.Fprintf(os.Stderr, "dump of test %s: %v\n", test, err)
			}
		}
	}
	return runner.Run(ctx, c.Tests, opts.Test)
}

// offlineReport is the report --output json prints: lowerCamelCase names,
// as kubectl's JSON has, and durations in seconds, which a CI script can
// compare without knowing Go's nanoseconds.
type offlineReport struct {
	Results []offlineResult `json:"results"`
	Total   int             `json:"total"`
	Passed  int             `json:"passed"`
	Failed  int             `json:"failed"`
}

type offlineResult struct {
	Name            string           `json:"name"`
	Description     string           `json:"description,omitempty"`
	Passed          bool             `json:"passed"`
	RenderError     string           `json:"renderError,omitempty"`
	Failures        []offlineFailure `json:"failures,omitempty"`
	DurationSeconds float64          `json:"durationSeconds"`
}

type offlineFailure struct {
	Assertion string `json:"assertion"`
	Message   string `json:"message"`
}

func jsonReport(report suite.Report) offlineReport {
	out := offlineReport{Results: []offlineResult{}, Total: report.Total, Passed: report.Total - report.Failed, Failed: report.Failed}
	for _, r := range report.Results {
		res := offlineResult{Name: r.Name, Description: r.Description, Passed: r.Passed, RenderError: r.RenderError, DurationSeconds: r.Duration.Seconds()}
		for _, f := range r.Failures {
			res.Failures = append(res.Failures, offlineFailure{Assertion: f.Assertion, Message: f.Message})
		}
		out.Results = append(out.Results, res)
	}
	return out
}

func writeSummary(w io.Writer, report suite.Report) {
	for _, r := range report.Results {
		mark := "PASS"
		if !r.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s  %s (%s)\n", mark, r.Name, r.Duration.Round(100_000))
		if !r.Passed && r.RenderError != "" {
			fmt.Fprintf(w, "      rendering failed: %s\n", r.RenderError)
		}
		for _, f := range r.Failures {
			fmt.Fprintf(w, "      %s: %s\n", f.Assertion, f.Message)
		}
	}
	fmt.Fprintf(w, "\n%d/%d tests passed\n", report.Total-report.Failed, report.Total)
}

func dumpRendering(dir string, out render.Output) error {
	files := map[string]string{"haproxy.cfg": out.HAProxyConfig}
	for sub, m := range map[string]map[string]string{"maps": out.Maps, "general": out.Files, "ssl": out.Certs} {
		for name, text := range m {
			files[filepath.Join(sub, name)] = text
		}
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}
