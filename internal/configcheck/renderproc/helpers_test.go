package renderproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// newPool returns a pool closed at the end of the test, recording the pids
// of the workers it starts.
func newPool(t testing.TB, opts Options) (*Pool, *pids) {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	started := &pids{}
	p.stats.onStart = started.add
	t.Cleanup(func() { _ = p.Close() })
	return p, started
}

type pids struct {
	mu   sync.Mutex
	list []int
}

func (p *pids) add(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, pid)
}

func (p *pids) get() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.list...)
}

// busy counts the pool's slots taken by renderings.
func (p *Pool) busy() int { return cap(p.slots) - len(p.slots) }

func compileBoth(t testing.TB, p *Pool, templates render.Templates) (inProcess, pooled render.Renderer) {
	t.Helper()
	engine, err := render.NewEngine("")
	if err != nil {
		t.Fatal(err)
	}
	if inProcess, err = engine.Compile(templates); err != nil {
		t.Fatal(err)
	}
	if pooled, err = p.Compile(t.Context(), templates, ""); err != nil {
		t.Fatal(err)
	}
	return inProcess, pooled
}

// renderAlike renders data in-process and in the pool and fails the test
// unless both give the same output, or errors that read the same, have
// the same types and carry the same fail message. It returns the output.
func renderAlike(t testing.TB, inProcess, pooled render.Renderer, data render.Data) (render.Output, error) {
	t.Helper()
	want, wantErr := inProcess.Render(context.Background(), data)
	got, gotErr := pooled.Render(context.Background(), data)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("in-process error %v, pool error %v", wantErr, gotErr)
	}
	if wantErr != nil {
		sameError(t, gotErr, wantErr)
		return got, gotErr
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the pool renders differently:\n%s", firstDifference(fmt.Sprintf("%#v", got), fmt.Sprintf("%#v", want)))
	}
	return got, nil
}

func sameError(t testing.TB, got, want error) {
	t.Helper()
	if got.Error() != want.Error() {
		t.Errorf("error %q, in-process %q", got, want)
	}
	var wantFail, gotFail *render.FailError
	if errors.As(want, &wantFail) != errors.As(got, &gotFail) || (wantFail != nil && gotFail.Message != wantFail.Message) {
		t.Errorf("fail error %#v, in-process %#v", gotFail, wantFail)
	}
	var wantRender, gotRender *render.RenderError
	if errors.As(want, &wantRender) != errors.As(got, &gotRender) || (wantRender != nil && gotRender.Template != wantRender.Template) {
		t.Errorf("render error %#v, in-process %#v", gotRender, wantRender)
	}
}

func firstDifference(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(i-200, 0)
	return fmt.Sprintf("at byte %d:\n got: %q\nwant: %q", i, got[from:min(i+200, len(got))], want[from:min(i+200, len(want))])
}

// exampleConfig is examples/configcheck/config.yaml.
func exampleConfig(t testing.TB) (render.Templates, map[string]*render.Indexer) {
	t.Helper()
	raw, err := os.ReadFile("../../../examples/configcheck/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg gatehousev1alpha1.HAProxyTemplateConfig
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	texts := func(in map[string]gatehousev1alpha1.Template) map[string]string {
		out := make(map[string]string, len(in))
		for name, tmpl := range in {
			out[name] = tmpl.Template
		}
		return out
	}
	templates := render.Templates{
		Snippets:        texts(cfg.Spec.TemplateSnippets),
		HAProxyConfig:   cfg.Spec.HAProxyConfig.Template,
		Maps:            texts(cfg.Spec.Maps),
		Files:           texts(cfg.Spec.Files),
		SSLCertificates: texts(cfg.Spec.SSLCertificates),
	}
	indexers := make(map[string]*render.Indexer)
	for name, watched := range cfg.Spec.WatchedResources {
		if indexers[name], err = render.NewIndexer(watched.IndexBy); err != nil {
			t.Fatal(err)
		}
	}
	if len(indexers) != 2 || indexers["ingresses"] == nil || indexers["services"] == nil || templates.Maps["hosts.map"] == "" {
		t.Fatalf("the example config changed: watched %v, maps %v", indexers, templates.Maps)
	}
	return templates, indexers
}

// exampleObjects are n Ingresses, each to a Service of its own (one in
// five sharing its neighbour's), decoded from JSON as the API server's
// objects are. Some carry what a hostile author would write: markup, line
// separators, a backend-name annotation, odd numbers.
func exampleObjects(t testing.TB, n int) (ingresses, services []map[string]any) {
	t.Helper()
	for i := range n {
		namespace := fmt.Sprintf("team-%02d", i/5%17)
		service := fmt.Sprintf("svc-%04d", i-i%5/4)
		annotations := "{}"
		if i%7 == 0 {
			annotations = fmt.Sprintf(`{"haproxy.gatehouse.dev/backend-name": "be_custom_%d", "note": "<&> \u2028 ünï"}`, i)
		}
		ingresses = append(ingresses, decodeJSON(t, fmt.Sprintf(`{
			"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
			"metadata": {"namespace": %q, "name": "ing-%04d", "annotations": %s, "generation": %d},
			"spec": {"ingressClassName": "haproxy", "rules": [
				{"host": "app-%04d.example", "http": {"paths": [
					{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": %q, "port": {"number": %d}}}},
					{"path": "/api", "pathType": "Prefix", "backend": {"service": {"name": %q, "port": {"number": 8443}}}}
				]}}
			]},
			"status": {"loadBalancer": {"ingress": null}, "weight": %v}
		}`, namespace, i, annotations, i, i, service, 80+i%3, service, float64(i)/4)))
		services = append(services, decodeJSON(t, fmt.Sprintf(`{
			"apiVersion": "v1", "kind": "Service",
			"metadata": {"namespace": %q, "name": "svc-%04d"},
			"spec": {"clusterIP": "10.%d.%d.%d", "ports": [{"port": %d, "targetPort": "http"}]}
		}`, namespace, i, i/65536, i/256%256, i%256, 80+i%3)))
	}
	return ingresses, services
}

func decodeJSON(t testing.TB, text string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(text), &obj); err != nil {
		t.Fatalf("%v in %s", err, text)
	}
	return obj
}

func mustStore(t testing.TB, indexer *render.Indexer, objs ...map[string]any) *render.MemoryStore {
	t.Helper()
	store, err := render.NewMemoryStore(indexer, objs...)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func mustOverlay(t testing.TB, base render.IndexedStore, op render.Operation, obj map[string]any) render.IndexedStore {
	t.Helper()
	overlay, err := render.Overlay(base, op, obj)
	if err != nil {
		t.Fatal(err)
	}
	return overlay
}

// gone reports whether no process has pid (it was killed and reaped).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// waitFor polls cond for up to limit; the limit only keeps a broken test
// from hanging, the tests assert on state, not on time.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// peakRSS is the test process's peak resident set (VmHWM).
func peakRSS(t testing.TB) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// procLines reads /proc/<pid>/<file> as lines.
func procLines(t testing.TB, pid int, file string) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}
