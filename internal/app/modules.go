package app

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/textcut"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// A module that cannot start fails alone (docs/modules.md, "A module that
// cannot start"): its Setup's error is its state, every other module
// serves. moduleStates is what this replica knows of each enabled module.
type moduleStates struct {
	mu     sync.Mutex
	failed map[string]failedModule
}

// failedModule is a module that could not start: why, and what it would
// have served (to tell whether the webhook configurations name it).
type failedModule struct {
	reason string
	paths  []string
}

// started records a module that serves.
func (s *moduleStates) started(name string) {
	s.mu.Lock()
	delete(s.failed, name)
	s.mu.Unlock()
	metrics.ModuleReady.WithLabelValues(name).Set(1)
}

// fail records a module that could not start, with the webhooks it
// declared.
func (s *moduleStates) fail(name string, reason error, hooks []module.Webhook) {
	f := failedModule{reason: reason.Error()}
	for _, h := range hooks {
		if h.Type != module.Conversion {
			f.paths = append(f.paths, h.Path)
		}
	}
	s.mu.Lock()
	if s.failed == nil {
		s.failed = map[string]failedModule{}
	}
	s.failed[name] = f
	s.mu.Unlock()
	metrics.ModuleReady.WithLabelValues(name).Set(0)
}

func (s *moduleStates) get(name string) (failedModule, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.failed[name]
	return f, ok
}

// FailedModules are the enabled modules that could not start, with the
// reason each gave; nil when every module serves.
func (g *Gatehouse) FailedModules() map[string]string {
	g.modules.mu.Lock()
	defer g.modules.mu.Unlock()
	if len(g.modules.failed) == 0 {
		return nil
	}
	out := make(map[string]string, len(g.modules.failed))
	for name, f := range g.modules.failed {
		out[name] = f.reason
	}
	return out
}

// failRunning fails a module one of whose runnables returned an error
// while the host runs: reported as a module that could not start, its
// webhooks answer undecided (the failure policy) on this replica and the
// leader withdraws them; the other modules serve. What else of the module
// runs goes on (the manager stops no runnable alone); its caches no longer
// hold /readyz back. Failer is not called: the module's own loops may
// still write its objects.
func (g *Gatehouse) failRunning(h *host, err error) {
	if h.failed.Swap(true) {
		h.log.Error(err, "another of the module's runnables failed", "module", h.name)
		return
	}
	g.modules.fail(h.name, err, h.hooks)
	g.Server.Withdraw(h.name)
	if g.reconciler != nil {
		var paths []string
		for _, hook := range h.hooks {
			paths = append(paths, hook.Path)
		}
		g.reconciler.Withdraw(h.name, paths)
	}
	h.log.Error(err, "module failed while running: its webhooks are withdrawn; the other modules serve without it", "module", h.name)
}

// setupModule runs m's Setup; a panic is its failure, as an error is.
func setupModule(ctx context.Context, m module.Module, h module.Host) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("Setup panicked: %v", p)
		}
	}()
	return m.Setup(ctx, h)
}

// failedSetup runs a Failer's Failed, staged as Setup is: what it
// registers runs only when it returned without an error.
func failedSetup(ctx context.Context, f module.Failer, h *host, reason error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("Failed panicked: %v", p)
		}
		if err != nil {
			h.discard()
			return
		}
		err = h.commit()
	}()
	return f.Failed(ctx, h, reason)
}

// moduleNote is the /readyz line of a module: "" while it serves.
func (g *Gatehouse) moduleNote(name string) func() string {
	return func() string {
		f, ok := g.modules.get(name)
		if !ok {
			return ""
		}
		return "not started: " + bounded(f.reason, 300)
	}
}

// moduleCheck fails /readyz while a module that could not start on this
// replica is named by the webhook configurations of this install, written
// by a leader whose module did start. The API server would send this replica
// calls it cannot answer (404, the failure policy); unready, the Service
// sends them to the replicas that can. Otherwise, the usual case (the
// leader's module failed too, or one replica alone), a failed module makes
// no replica unready: its webhooks are withdrawn, and taking the replica
// out of the Service would take down every other module with it, which is
// what failing alone is for. In static mode (the chart writes the
// configurations) Gatehouse does not read them: the replica stays ready
// and the failed module's calls get the failure policy
// (docs/modules.md, "A module that cannot start").
func (g *Gatehouse) moduleCheck(name string, platform cache.Cache) func() error {
	return func() error {
		f, ok := g.modules.get(name)
		if !ok || g.opts.ManageWebhooks == nil {
			return nil
		}
		// A readiness check answers, never waits for a cache that cannot
		// sync (as webhookconfig's Written).
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		defer cancel()
		named, err := namedByConfigurations(ctx, platform, g.opts.Instance, f)
		if err != nil {
			return err
		}
		if named != "" {
			return fmt.Errorf("could not start, and %s is written (by a leader it started on): this replica cannot answer it", named)
		}
		return nil
	}
}

// namedByConfigurations names the first of f's admission webhooks the
// cached configurations of instance call; "" when none. A CRD's conversion
// stanza is not looked at: a leader whose module failed leaves it as it
// is (webhookconfig writes the stanzas of the started modules only), so a
// stanza written before would make every replica unready, every other
// module with them, and answer no conversion more (docs/modules.md, "A
// module that cannot start").
func namedByConfigurations(ctx context.Context, c client.Reader, instance string, f failedModule) (string, error) {
	validating, mutating := webhookconfig.ConfigurationNames(instance)
	calls := func(cc admissionregistrationv1.WebhookClientConfig) bool {
		var path string
		switch {
		case cc.Service != nil && cc.Service.Path != nil:
			path = *cc.Service.Path
		case cc.URL != nil:
			u, err := url.Parse(*cc.URL)
			if err != nil {
				return false
			}
			path = u.Path
		}
		return slices.Contains(f.paths, path)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: validating}, vwc); client.IgnoreNotFound(err) != nil {
		return "", err
	}
	for _, w := range vwc.Webhooks {
		if calls(w.ClientConfig) {
			return "validating webhook " + w.Name, nil
		}
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: mutating}, mwc); client.IgnoreNotFound(err) != nil {
		return "", err
	}
	for _, w := range mwc.Webhooks {
		if calls(w.ClientConfig) {
			return "mutating webhook " + w.Name, nil
		}
	}
	return "", nil
}

// bounded cuts s to n bytes at most, on a rune boundary.
func bounded(s string, n int) string { return textcut.Bound(s, n, "…") }
