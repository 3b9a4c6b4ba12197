package ondemand

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// onDemandTemplate reads the certificate Secret team-a/cert, and the CA
// Secret its data names, from an on-demand store (haptic's ssl library
// reads a CA named by an annotation the same way): two fetches, one
// after the other.
const onDemandTemplate = `{% var s = resources.secrets.GetSingle("team-a", "cert") %}
{% if s == nil %}{{ fail("TLS Secret not found: team-a/cert") }}{% end %}
{% var caName = s | dig("data", "ca") | fallback("") | tostring() %}
{% var ca = resources.secrets.GetSingle("team-a", caName) %}
global
  # cert {{ s | dig("data", "tls.crt") | fallback("") | tostring() }} ca {{ ca | dig("data", "tls.crt") | fallback("none") | tostring() }}
`

func onDemandConfig(t *testing.T, template string) *spec.Compiled {
	t.Helper()
	cfgSpec := &hapticv1alpha1.HAProxyTemplateConfigSpec{
		WatchedResources: map[string]hapticv1alpha1.WatchedResource{
			"secrets": {APIVersion: "v1", Resources: "secrets", IndexBy: []string{"metadata.namespace", "metadata.name"}, Store: "on-demand"},
		},
		HAProxyConfig: hapticv1alpha1.Template{Template: template},
	}
	c, errs := spec.CompileHaptic(cfgSpec, inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return c
}

// fakeFetch serves objects by namespace/name and counts the fetches.
type fakeFetch struct {
	mu      sync.Mutex
	objects map[string]map[string]any
	calls   []string
	err     error
}

func (f *fakeFetch) fetch(_ context.Context, _ *spec.Watched, namespace, name string) (map[string]any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, namespace+"/"+name)
	if f.err != nil {
		return nil, f.err
	}
	return f.objects[namespace+"/"+name], nil
}

func (f *fakeFetch) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func secret(namespace, name string, data map[string]any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"namespace": namespace, "name": name}, "data": data}
}

// TestOnDemandObjectsAreFetchedAndRenderedAgain: a rendering that asks an
// on-demand store for objects it does not hold is rendered again with
// them fetched, one round per step (the CA named by the certificate's
// Secret); a later rendering within onDemandTTL fetches nothing, and one
// after it fetches again what is held. An object the fetch says is absent
// ends the rounds: the template's own failure stands, and the absence is
// remembered for onDemandTTL, except by a confirmation, which fetches
// everything anew (a Secret created a moment before is found there).
func TestOnDemandObjectsAreFetchedAndRenderedAgain(t *testing.T) {
	c := onDemandConfig(t, onDemandTemplate)
	f := &fakeFetch{objects: map[string]map[string]any{
		"team-a/cert": secret("team-a", "cert", map[string]any{"tls.crt": "CERT", "ca": "root"}),
		"team-a/root": secret("team-a", "root", map[string]any{"tls.crt": "ROOT"}),
	}}
	set, err := NewSet(c, f.fetch, true)
	if err != nil || set == nil {
		t.Fatalf("set %v: %v", set, err)
	}
	now := time.Unix(1_000_000, 0)
	set.now = func() time.Time { return now }
	renderWith := func(set *Set) (render.Output, error) {
		stores := map[string]render.IndexedStore{}
		set.AddStores(stores)
		return Render(WithSet(t.Context(), set), c, storesData(stores))
	}
	out, err := renderWith(set)
	if err != nil || !strings.Contains(out.HAProxyConfig, "# cert CERT ca ROOT") {
		t.Fatalf("rendering %q: %v", out.HAProxyConfig, err)
	}
	if got := strings.Join(f.took(), " "); got != "team-a/cert team-a/root" {
		t.Errorf("fetched %q, want the certificate, then its CA", got)
	}
	now = now.Add(onDemandTTL / 2)
	if _, err := renderWith(set); err != nil || len(f.took()) != 0 {
		t.Errorf("within the TTL: %v; fetched again", err)
	}
	now = now.Add(onDemandTTL)
	if _, err := renderWith(set); err != nil || len(f.took()) != 2 {
		t.Errorf("after the TTL: %v; want both fetched again", err)
	}

	// Gone: refreshed as absent, the template's failure stands, and no
	// round asks for them again.
	f.objects = map[string]map[string]any{}
	now = now.Add(2 * onDemandTTL)
	_, err = renderWith(set)
	var failure *render.FailError
	if !errors.As(err, &failure) || failure.Message != "TLS Secret not found: team-a/cert" {
		t.Fatalf("without the Secret: %v", err)
	}
	if got := f.took(); len(got) != 2 {
		t.Errorf("fetched %v; want the two held fetched again, and nothing more", got)
	}
	// Created a moment later: the absence is remembered within the TTL;
	// a confirmation fetches anew and finds it.
	f.objects["team-a/cert"] = secret("team-a", "cert", map[string]any{"tls.crt": "NEW"})
	if _, err := renderWith(set); !errors.As(err, &failure) || len(f.took()) != 0 {
		t.Fatalf("within the TTL of the absence: %v", err)
	}
	if out, err := renderWith(set.Uncached()); err != nil || !strings.Contains(out.HAProxyConfig, "# cert NEW ca none") {
		t.Fatalf("a confirmation after the Secret was created: %q %v", out.HAProxyConfig, err)
	}
	now = now.Add(onDemandTTL)
	if out, err := renderWith(set); err != nil || !strings.Contains(out.HAProxyConfig, "# cert NEW ca none") {
		t.Fatalf("after the absence's TTL: %q %v", out.HAProxyConfig, err)
	}
}

// TestOnDemandFetchesAreBoundedByDecision, as a tenant whose Ingresses
// name a hundred Secrets (each a TLS Secret the templates ask for): one
// decision fetches at most onDemandFetchBudget of them, and what it found
// absent costs nothing in the next decisions of the TTL.
func TestOnDemandFetchesAreBoundedByDecision(t *testing.T) {
	var template strings.Builder
	for i := range 100 {
		fmt.Fprintf(&template, "{%% var s%d = resources.secrets.GetSingle(\"team-b\", \"tls-%d\") %%}\n", i, i)
	}
	template.WriteString("global\n")
	c := onDemandConfig(t, template.String())
	f := &fakeFetch{objects: map[string]map[string]any{}}
	set, err := NewSet(c, f.fetch, true)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	set.now = func() time.Time { return now }
	stores := map[string]render.IndexedStore{}
	set.AddStores(stores)
	if _, err := Render(WithSet(t.Context(), set), c, storesData(stores)); err != nil {
		t.Fatal(err)
	}
	if got := len(f.took()); got == 0 || got > onDemandFetchBudget {
		t.Fatalf("one decision fetched %d objects, want 1 to %d", got, onDemandFetchBudget)
	}
	if _, err := Render(WithSet(t.Context(), set), c, storesData(stores)); err != nil {
		t.Fatal(err)
	}
	if got := f.took(); len(got) > onDemandFetchBudget || slices.Contains(got, "team-b/tls-0") {
		t.Fatalf("the next decision fetched %d, the known absent among them: %v", len(got), got)
	}
}

// TestOnDemandIsBoundedInBytes: a config's fetched objects stay within
// onDemandMaxBytes, the oldest fetched dropped first.
func TestOnDemandIsBoundedInBytes(t *testing.T) {
	c := onDemandConfig(t, onDemandTemplate)
	set, _ := NewSet(c, nil, true)
	now := time.Unix(1_000_000, 0)
	set.now = func() time.Time { now = now.Add(time.Second); return now }
	big := strings.Repeat("x", onDemandMaxBytes/3)
	for _, name := range []string{"a", "b", "c", "d"} {
		if !set.put(Key{watched: "secrets", NamespacedName: nn("team-a", name)}, secret("team-a", name, map[string]any{"v": big})) {
			t.Fatalf("%s not held", name)
		}
	}
	if set.bytes > onDemandMaxBytes {
		t.Fatalf("%d bytes held", set.bytes)
	}
	if obj, _ := set.stores["secrets"].GetSingle("team-a", "a"); obj != nil {
		t.Error("the oldest was kept")
	}
	if obj, _ := set.stores["secrets"].GetSingle("team-a", "d"); obj == nil {
		t.Error("the newest was dropped")
	}
	if set.put(Key{watched: "secrets", NamespacedName: nn("team-a", "huge")}, secret("team-a", "huge", map[string]any{"v": strings.Repeat("x", onDemandMaxBytes)})) {
		t.Error("an object larger than the bound was held")
	}
}

func nn(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

func storesData(stores map[string]render.IndexedStore) render.Data {
	data := render.Data{Resources: make(map[string]render.Store, len(stores))}
	for name, s := range stores {
		data.Resources[name] = s
	}
	return data
}
