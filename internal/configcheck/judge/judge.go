package judge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/haproxy"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/ondemand"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

// Phases of a watched resource's admission, as metrics and logs name them.
const (
	PhaseStructure = "structure"
	PhaseRender    = "render"
	PhaseHAProxy   = "haproxy"
	// PhasePolicy is the check policy refusing a rendering before haproxy
	// reads it (Lua, external commands, files outside the check).
	PhasePolicy = "policy"
	PhaseTests  = "tests"
)

// Verdict is the outcome of judging one rendering.
type Verdict struct {
	// denial is the reason to refuse ("" to admit); phase says where.
	Denial string
	Phase  string
	// undecided is why no decision could be made in time; shed says it
	// was for lack of capacity (configcheck's shed.go).
	Undecided string
	Shed      bool
	Cached    bool
	// alerts are haproxy's, every one, when phase is haproxy: what the
	// failure is, to tell whether a change adds to it.
	Alerts haproxy.Alerts
}

// CheckStructure is the spec's basic check, before any rendering.
func CheckStructure(obj map[string]any) error {
	if obj == nil {
		return errors.New("failed to parse object: the request carries no object")
	}
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return errors.New("metadata.name or metadata.generateName is required")
	}
	name, _ := meta["name"].(string)
	generateName, _ := meta["generateName"].(string)
	if name == "" && generateName == "" {
		return errors.New("metadata.name or metadata.generateName is required")
	}
	if name == "" {
		delete(meta, "name")
	}
	return nil
}

// Overlaid shows stores as they would be after op on obj in the store of
// watched.
func Overlaid(stores map[string]render.IndexedStore, watched string, op render.Operation, obj map[string]any) (render.Data, error) {
	data := DataOf(stores)
	base, ok := stores[watched]
	if !ok {
		return data, fmt.Errorf("no store for watched resource %s", watched)
	}
	o, err := render.Overlay(base, op, obj)
	if err != nil {
		return data, err
	}
	data.Resources[watched] = o
	return data, nil
}

// DataOf shows stores to the templates as they are.
func DataOf(stores map[string]render.IndexedStore) render.Data {
	data := render.Data{Resources: make(map[string]render.Store, len(stores))}
	for name, s := range stores {
		data.Resources[name] = s
	}
	return data
}

// HAProxyRejects opens a denial of the haproxy -c phase; its alerts follow
// one per line.
const HAProxyRejects = "haproxy -c rejects the rendered configuration:"

// Judge renders data, checks the rendering with haproxy, and applies the
// embedded tests' result, stopping at the first phase that fails.
func Judge(ctx context.Context, checker *haproxy.Checker, c *spec.Compiled, data render.Data, failedTests string) Verdict {
	data.ExtraContext = c.ExtraContext
	start := time.Now()
	out, err := ondemand.Render(ctx, c, data)
	metrics.ObservePhase(PhaseRender, time.Since(start))
	var fetchErr *ondemand.Error
	if errors.As(err, &fetchErr) {
		return Verdict{Undecided: fetchErr.Error()}
	}
	if err != nil {
		if errors.Is(err, fair.ErrFull) {
			return Verdict{Undecided: "configcheck: the rendering was not started: " + err.Error() + "; try again in a moment", Shed: true}
		}
		if ctx.Err() != nil {
			return Verdict{Undecided: "configcheck: rendering did not finish within the webhook's timeout", Shed: true}
		}
		return Verdict{Denial: RenderFailure(err), Phase: PhaseRender}
	}
	return Check(ctx, checker, c.Dialect, out, failedTests)
}

// Check checks a rendering with the check policy and haproxy, as
// its config's dialect has it checked (asChecked), and applies the
// embedded tests' result, stopping at the first that fails.
func Check(ctx context.Context, checker *haproxy.Checker, dialect suite.Dialect, out render.Output, failedTests string) Verdict {
	start := time.Now()
	checked, err := checker.Check(ctx, AsChecked(out, dialect))
	metrics.ObservePhase(PhaseHAProxy, time.Since(start))
	if err != nil {
		if errors.Is(err, haproxy.ErrBusy) || ctx.Err() != nil {
			return Verdict{Undecided: "configcheck: " + err.Error(), Shed: true}
		}
		return Verdict{Undecided: "configcheck: haproxy -c could not run: " + err.Error()}
	}
	metrics.CountCheck(checked)
	if checked.Refused {
		return Verdict{Denial: checked.Message, Phase: PhasePolicy, Cached: checked.Cached}
	}
	if !checked.Valid {
		return Verdict{Denial: HAProxyRejects + "\n" + checked.Message, Phase: PhaseHAProxy, Cached: checked.Cached, Alerts: checked.Alerts}
	}
	if failedTests != "" {
		return Verdict{Denial: failedTests, Phase: PhaseTests, Cached: checked.Cached}
	}
	return Verdict{Cached: checked.Cached}
}

// RenderFailure is a render error as a person reads it: a template's fail
// text alone, as the spec asks, or the engine's error naming the template.
func RenderFailure(err error) string {
	var failure *render.FailError
	if errors.As(err, &failure) {
		return failure.Message
	}
	return "rendering failed: " + err.Error()
}

// hapticBaseDir is haptic's pathResolver.GetBaseDir(), the directory its
// templates name in "default-path origin" (the scriggo engine's
// pathResolver renders it): haptic's controller deploys there.
const hapticBaseDir = "/etc/haproxy"

// AsChecked is out as the check sees it. haptic's validator rewrites
// "default-path origin <its base directory>" to its check directory
// before running haproxy; Gatehouse's check policy refuses an origin
// outside the checked directory, so for haptic's configs exactly that
// line becomes "default-path config", which names the same layout there
// (every other path haptic renders is relative: maps/, ssl/, general/).
// Any other origin stays refused. The rendering itself, which the
// assertions read, is unchanged.
func AsChecked(out render.Output, dialect suite.Dialect) render.Output {
	if dialect != suite.DialectHaptic || !strings.Contains(out.HAProxyConfig, hapticBaseDir) {
		return out
	}
	lines := strings.SplitAfter(out.HAProxyConfig, "\n")
	for i, line := range lines {
		if fields := strings.Fields(line); len(fields) == 3 && fields[0] == "default-path" && fields[1] == "origin" && strings.TrimSuffix(fields[2], "/") == hapticBaseDir {
			indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			lines[i] = indent + "default-path config\n"
		}
	}
	out.HAProxyConfig = strings.Join(lines, "")
	return out
}

func IdentityOf(obj map[string]any) (namespace, name string) {
	meta, _ := obj["metadata"].(map[string]any)
	namespace, _ = meta["namespace"].(string)
	name, _ = meta["name"].(string)
	return namespace, name
}

// AddsNoFailure reports whether proposed fails for no reason current does
// not fail for already. A render stops at its first failure, so the
// messages must be equal; haproxy -c reports every alert, so each of
// proposed's alerts must be among current's as many times (three backends
// of one name are two alerts), line numbers aside (an object added above a
// broken line moves it). A list of alerts that is not complete (more than
// haproxy.MaxAlerts, or haproxy's output cut) may hide the alert the change
// adds, and is never taken as the same.
func AddsNoFailure(proposed, current Verdict) bool {
	if proposed.Denial == "" || current.Denial == "" || proposed.Phase != current.Phase {
		return false
	}
	if proposed.Phase != PhaseHAProxy || len(proposed.Alerts.Keys) == 0 && proposed.Alerts.Complete() {
		return proposed.Denial == current.Denial
	}
	return proposed.Alerts.Within(current.Alerts)
}

// FailureWarningPrefix starts the warning that quotes the failure a change
// was admitted over (configcheck's forCaller redacts it).
const FailureWarningPrefix = "the failure: "

// PreexistingWarnings tell the person whose change was admitted what
// fails and that their change was checked only up to it.
func PreexistingWarnings(key spec.Key, denial string) []string {
	// The first line that names the failure: for haproxy -c, its first
	// alert.
	first, rest, _ := strings.Cut(denial, "\n")
	if first == HAProxyRejects || first == haproxy.PolicyRefuses {
		first, _, _ = strings.Cut(rest, "\n")
	}
	return []string{
		guard.Bounded(fmt.Sprintf("HAProxyTemplateConfig %s fails without this change too, so the change was admitted, checked only up to that failure; "+
			"%s", key, key.UntilFixed("it is fixed", false)), 250),
		guard.Bounded(FailureWarningPrefix+first, 250),
	}
}

// TestRunner runs c's embedded tests, each rendering checked as an
// admission's is (AsChecked, then checker): a test passes or fails for what
// the cluster would do.
func TestRunner(checker *haproxy.Checker, c *spec.Compiled) *suite.Runner {
	indexBy := make(map[string][]string, len(c.Watched))
	for name, w := range c.Watched {
		indexBy[name] = w.IndexBy
	}
	check := func(ctx context.Context, out render.Output) (bool, string, error) {
		v, err := checker.Check(ctx, AsChecked(out, c.Dialect))
		if err != nil {
			return false, "", err
		}
		metrics.CountCheck(v)
		return v.Valid, v.Message, nil
	}
	return &suite.Runner{Renderer: c.Renderer, IndexBy: indexBy, ExtraContext: c.ExtraContext, Check: check, Dialect: c.Dialect}
}
