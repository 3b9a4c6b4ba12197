package renderproc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// Templates an attacker writes.
const (
	// heldBomb keeps a hundred 10 MB strings alive, each within the
	// engine's bound on one value: only the worker's memory budget stops
	// it. (The doubling printf and until 40000000 are refused by the
	// engine's bounds before they allocate; see render's limits.)
	heldBomb = `{{ $d := dict }}{{ range $i := until 100 }}{{ $_ := set $d (toString $i) (repeat 10000000 "x") }}{{ end }}{{ len $d }}`
	// silentLoop never writes and runs for hours: each of its million
	// iterations builds (and drops) a 10 MB string, within every bound the
	// engine checks (range items are charged when the range starts, each
	// value is under its cap), so only the worker's deadline stops it.
	silentLoop = `{{ range until 1000000 }}{{ $x := repeat 10000000 "x" }}{{ end }}`
)

func compileOne(t testing.TB, p *Pool, haproxyConfig string) render.Renderer {
	t.Helper()
	r, err := p.Compile(t.Context(), render.Templates{HAProxyConfig: haproxyConfig}, "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestExampleConfigRendersAsInProcess(t *testing.T) {
	templates, indexers := exampleConfig(t)
	ingressObjects, serviceObjects := exampleObjects(t, 300)
	ingresses := mustStore(t, indexers["ingresses"], ingressObjects...)
	services := mustStore(t, indexers["services"], serviceObjects...)
	p, _ := newPool(t, Options{Workers: 2})
	inProcess, pooled := compileBoth(t, p, templates)
	data := func(ingresses, services render.Store) render.Data {
		return render.Data{Resources: map[string]render.Store{"ingresses": ingresses, "services": services}}
	}

	out, err := renderAlike(t, inProcess, pooled, data(ingresses, services))
	if err != nil {
		t.Fatal(err)
	}
	// The comparison is of something: every Ingress is in it.
	if n := strings.Count(out.Maps["hosts.map"], ".example be_"); n != 600 {
		t.Fatalf("%d host map lines, want 600:\n%.500s", n, out.Maps["hosts.map"])
	}
	if !strings.Contains(out.HAProxyConfig, "backend be_custom_7\n  server s1 10.0.0.7:81") {
		t.Fatalf("the annotation's backend is missing:\n%.1000s", out.HAProxyConfig)
	}

	newIngress := decodeJSON(t, `{"metadata": {"namespace": "team-03", "name": "new"}, "spec": {"rules": [
		{"host": "new.example", "http": {"paths": [{"path": "/", "backend": {"service": {"name": "svc-0016", "port": {"number": 81}}}}]}}]}}`)
	moved := decodeJSON(t, `{"metadata": {"namespace": "team-00", "name": "ing-0002", "annotations": {"haproxy.gatehouse.dev/backend-name": "be_moved"}}, "spec": {"rules": [
		{"host": "moved.example", "http": {"paths": [{"path": "/", "backend": {"service": {"name": "svc-0000", "port": {"number": 80.0}}}}]}}]}}`)
	toGhost := decodeJSON(t, `{"metadata": {"namespace": "team-01", "name": "ghostly"}, "spec": {"rules": [
		{"host": "ghost.example", "http": {"paths": [{"path": "/", "backend": {"service": {"name": "ghost", "port": {"number": 80}}}}]}}]}}`)
	steps := []struct {
		name               string
		ingresses, service render.Store
		// wantFail is in the fail message, when the change is refused.
		wantFail string
	}{
		{"CREATE an Ingress", mustOverlay(t, ingresses, render.OperationCreate, newIngress), services, ""},
		{"UPDATE an Ingress to another host and Service", mustOverlay(t, ingresses, render.OperationUpdate, moved), services, ""},
		{"DELETE an Ingress", mustOverlay(t, ingresses, render.OperationDelete, ingressObjects[3]), services, ""},
		{"DELETE an unused Service", ingresses, mustOverlay(t, services, render.OperationDelete, serviceObjects[4]), ""},
		{"DELETE a Service in use", ingresses, mustOverlay(t, services, render.OperationDelete, serviceObjects[10]),
			"Service 'svc-0010' not found (Ingress team-02/ing-0010"},
		{"CREATE an Ingress to a missing Service", mustOverlay(t, ingresses, render.OperationCreate, toGhost), services,
			"Service 'ghost' not found"},
	}
	for _, step := range steps {
		_, err := renderAlike(t, inProcess, pooled, data(step.ingresses, step.service))
		var failed *render.FailError
		switch {
		case step.wantFail == "" && err != nil:
			t.Errorf("%s: %v", step.name, err)
		case step.wantFail != "" && (!errors.As(err, &failed) || !strings.Contains(failed.Message, step.wantFail)):
			t.Errorf("%s: error %v, want a fail message with %q", step.name, err, step.wantFail)
		}
	}

	// The informers change the stores: the workers see the new versions,
	// also under an overlay.
	changed := decodeJSON(t, `{"metadata": {"namespace": "team-00", "name": "ing-0001"}, "spec": {"rules": [
		{"host": "changed.example", "http": {"paths": [{"path": "/", "backend": {"service": {"name": "svc-0001", "port": {"number": 8081}}}}]}}]}}`)
	if err := ingresses.Upsert(changed); err != nil {
		t.Fatal(err)
	}
	services.Delete("team-00", "svc-0004")
	for range 3 { // on both workers
		out, err := renderAlike(t, inProcess, pooled, data(ingresses, services))
		if err != nil || !strings.Contains(out.Maps["hosts.map"], "changed.example") {
			t.Fatalf("the change is not rendered (%v)", err)
		}
		if _, err := renderAlike(t, inProcess, pooled, data(mustOverlay(t, ingresses, render.OperationCreate, newIngress), services)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestValuesCrossExactly(t *testing.T) {
	// Objects as the informers decode them (int64 for whole numbers), with
	// the values JSON could get wrong: beyond float64's integers, the int64
	// extremes, fractions, denormals, markup and line separators.
	thing := func(name string) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"namespace": "ns", "name": name},
			"spec": map[string]any{
				"beyondFloat": int64(9007199254740993), "max": int64(math.MaxInt64), "min": int64(math.MinInt64),
				"whole": 8080.0, "half": 1.5, "huge": 1e20, "tiny": 5e-324, "negativeZero": math.Copysign(0, -1),
				"text": "<&> \u2028 \"\\ ünï 😀", "yes": true, "null": nil, "empty": map[string]any{},
				"list": []any{1.0, nil, "x", []any{}, map[string]any{"k": int64(2)}},
			},
		}
	}
	const template = `{{ range $o := .resources.things.List }}{{ $o.metadata.name }}:
{{- range $k, $v := $o.spec }} {{ $k }}={{ $v | trusted }}({{ typeOf $v }}){{ end }}
{{ toJson $o }} {{ add $o.spec.whole 1 }} {{ add $o.spec.beyondFloat 0 }}
{{ end }}{{ toJson .extraContext }} {{ add .extraContext.port 1 }} {{ .extraContext.nested.list }}
{{ with .resources.things.GetSingle "ns" "b" }}{{ .metadata.name }}{{ end }}`
	store := mustStore(t, mustIndexer(t, "metadata.namespace", "metadata.name"), thing("a"), thing("b"))
	p, _ := newPool(t, Options{Workers: 1})
	inProcess, pooled := compileBoth(t, p, render.Templates{HAProxyConfig: template})
	extra := map[string]any{"port": 8080.0, "ratio": 0.25, "nested": map[string]any{"list": []any{2.0, "<b>"}}}

	out, err := renderAlike(t, inProcess, pooled, render.Data{Resources: map[string]render.Store{"things": store}, ExtraContext: extra})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"beyondFloat=9007199254740993(int64)", "whole=8080(int64)", "huge=1e+20(float64)", "8081 9007199254740993"} {
		if !strings.Contains(out.HAProxyConfig, want) {
			t.Errorf("no %q in\n%s", want, out.HAProxyConfig)
		}
	}
	// An overlay's object crosses the same way.
	overlay := mustOverlay(t, store, render.OperationCreate, thing("c"))
	if _, err := renderAlike(t, inProcess, pooled, render.Data{Resources: map[string]render.Store{"things": overlay}}); err != nil {
		t.Fatal(err)
	}
	// So does a store that is neither a MemoryStore nor an overlay.
	if _, err := renderAlike(t, inProcess, pooled, render.Data{Resources: map[string]render.Store{"things": plainStore{store}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pooled.Render(context.Background(), render.Data{Resources: map[string]render.Store{"things": unindexedStore{}}}); err == nil ||
		!strings.Contains(err.Error(), "cannot be sent to a rendering process") {
		t.Errorf("a store without an indexer: %v", err)
	}
}

// plainStore is an IndexedStore of another type than render's.
type plainStore struct{ render.IndexedStore }

// unindexedStore does not say how it is indexed.
type unindexedStore struct{ render.Store }

func mustIndexer(t testing.TB, indexBy ...string) *render.Indexer {
	t.Helper()
	indexer, err := render.NewIndexer(indexBy)
	if err != nil {
		t.Fatal(err)
	}
	return indexer
}

func TestErrorsAndBytesCrossExactly(t *testing.T) {
	p, started := newPool(t, Options{Workers: 1})
	things := mustStore(t, mustIndexer(t, "metadata.namespace"),
		decodeJSON(t, `{"metadata": {"namespace": "ns", "name": "a"}}`),
		decodeJSON(t, `{"metadata": {"namespace": "ns", "name": "b"}}`))
	data := render.Data{Resources: map[string]render.Store{"things": things}}

	// Compile errors come from the worker that compiled, as the
	// CompileError they are.
	for _, templates := range []render.Templates{
		{HAProxyConfig: "{{ if }}"},
		{HAProxyConfig: "ok", Maps: map[string]string{"a.map": "{{ end }}"}},
		{HAProxyConfig: "ok", Snippets: map[string]string{"s": `{{ define "x" }}{{ end }}`}, Files: map[string]string{"x": "{{ define \"x\" }}y{{ end }}"}},
	} {
		_, err := p.Compile(t.Context(), templates, "")
		var compileErr *render.CompileError
		if !errors.As(err, &compileErr) {
			t.Errorf("%v: %v is not a CompileError", templates, err)
		}
	}
	if n := len(started.get()); n != 1 {
		t.Errorf("compiling started %d workers, want the pool's one", n)
	}
	if _, err := p.Compile(t.Context(), render.Templates{HAProxyConfig: "ok"}, "jinja"); err == nil {
		t.Errorf("an unknown engine compiled")
	}

	for name, templates := range map[string]render.Templates{
		"a fail message with markup and bytes that are not UTF-8": {HAProxyConfig: `x{{ fail (printf "Service '%s' <&> %s" "a\u2028b" ("/w==" | b64dec)) }}`},
		"an empty fail message":                                   {HAProxyConfig: `{{ fail "" }}`},
		"fail in a snippet":                                       {HAProxyConfig: `{{ render "s" }}`, Snippets: map[string]string{"s": `{{ fail "from the snippet" }}`}},
		"fail in a map":                                           {HAProxyConfig: "ok", Maps: map[string]string{"m.map": `{{ fail "from the map" }}`}},
		"a render error of another kind":                          {HAProxyConfig: `{{ .resources.things.GetSingle "ns" }}`},
		"a missing snippet":                                       {HAProxyConfig: `{{ render "nothing" }}`},
		"output that is not UTF-8":                                {HAProxyConfig: `{{ "/w==" | b64dec | trusted }}{{ printf "%c" 0x1F600 }}`},
		"every kind of output": {HAProxyConfig: "cfg", Maps: map[string]string{"a.map": "a", "b.map": ""},
			Files: map[string]string{"e.http": "{{ len .resources.things.List }}"}, SSLCertificates: map[string]string{"c.pem": "pem"}},
	} {
		t.Run(name, func(t *testing.T) {
			inProcess, pooled := compileBoth(t, p, templates)
			out, err := renderAlike(t, inProcess, pooled, data)
			if name == "output that is not UTF-8" && out.HAProxyConfig != "\xff😀\n" {
				t.Errorf("output %q", out.HAProxyConfig)
			}
			if strings.Contains(name, "fail") {
				var failed *render.FailError
				if !errors.As(err, &failed) {
					t.Errorf("%v carries no FailError", err)
				}
			}
		})
	}
}

func TestOutputBeyondItsBudgetIsRefused(t *testing.T) {
	p, started := newPool(t, Options{Workers: 1, MaxOutputBytes: 4 << 10})
	_, err := compileOne(t, p, `{{ repeat 5000 "x" }}`).Render(context.Background(), render.Data{})
	if err == nil || err.Error() != "the rendering's output of 5001 bytes exceeds its budget of 4 KiB" {
		t.Errorf("error %v", err)
	}
	_, err = compileOne(t, p, `{{ fail (repeat 100000 "y") }}`).Render(context.Background(), render.Data{})
	var failed *render.FailError
	if !errors.As(err, &failed) || len(err.Error()) > 4<<10 || !strings.HasSuffix(failed.Message, truncatedSuffix) {
		t.Errorf("an oversized fail message: %d bytes, %.100v", len(err.Error()), err)
	}
	// The worker refused them: it is still the same.
	if out, err := compileOne(t, p, "fine").Render(context.Background(), render.Data{}); err != nil || out.HAProxyConfig != "fine\n" {
		t.Errorf("%q, %v", out.HAProxyConfig, err)
	}
	if n := len(started.get()); n != 1 {
		t.Errorf("%d workers started, want 1", n)
	}
}

// resetPeakRSS makes VmHWM the current RSS, so that it shows this test's
// peak only.
func resetPeakRSS(t *testing.T) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("VmHWM not reset (%v): it covers the earlier tests too", err)
	}
}

func TestMemoryBombIsRefusedWithinBudget(t *testing.T) {
	templates, indexers := exampleConfig(t)
	ingressObjects, serviceObjects := exampleObjects(t, 50)
	resources := map[string]render.Store{
		"ingresses": mustStore(t, indexers["ingresses"], ingressObjects...),
		"services":  mustStore(t, indexers["services"], serviceObjects...),
	}
	p, started := newPool(t, Options{Workers: 1})
	inProcess, pooled := compileBoth(t, p, templates)
	if _, err := renderAlike(t, inProcess, pooled, render.Data{Resources: resources}); err != nil {
		t.Fatal(err)
	}

	resetPeakRSS(t)
	before := peakRSS(t)
	for _, bomb := range []string{heldBomb, heldBomb + " "} {
		_, err := compileOne(t, p, bomb).Render(context.Background(), render.Data{Resources: resources})
		var budget *BudgetError
		if !errors.As(err, &budget) || err.Error() != "the rendering exceeded its memory budget of 512 MiB" {
			t.Errorf("%s: %v, want the memory budget error", bomb, err)
		}
		// The next rendering gets a new worker, which gets the stores anew.
		if _, err := renderAlike(t, inProcess, pooled, render.Data{Resources: resources}); err != nil {
			t.Fatalf("after %s: %v", bomb, err)
		}
	}
	after := peakRSS(t)
	t.Logf("peak RSS of the test process: %d MiB before the bombs, %d MiB after", before>>20, after>>20)
	if after > 300<<20 {
		t.Errorf("the test process's peak RSS reached %d MiB", after>>20)
	}
	if n := len(started.get()); n != 3 {
		t.Errorf("%d workers started, want 3 (one per bomb, one at first)", n)
	}
}

func TestSilentLoopIsKilledAtTheDeadline(t *testing.T) {
	p, started := newPool(t, Options{Workers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()

	_, err := compileOne(t, p, silentLoop).Render(ctx, render.Data{})
	late := time.Since(deadline)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's", err)
	}
	if late > time.Second {
		t.Errorf("the rendering returned %v after its deadline", late)
	}
	pid := started.get()[0]
	waitFor(t, time.Second, "gone, its CPU stopped", func() bool { return gone(pid) })
}

func TestRenderTimeoutBoundsAContextWithoutDeadline(t *testing.T) {
	p, _ := newPool(t, Options{Workers: 1, RenderTimeout: time.Second})
	_, err := compileOne(t, p, silentLoop).Render(context.Background(), render.Data{})
	var budget *TimeBudgetError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &budget) || !strings.Contains(err.Error(), "time budget of 1s") {
		t.Errorf("error %v, want the time budget's", err)
	}
}

// TestWorkersRetireBeforeTheirCPULimit renders far more CPU time than a
// worker's RLIMIT_CPU allows, in short renderings: none may fail, since the
// pool retires a worker before the limit could end a rendering. A worker
// retires once it has used CPUTime less two RenderTimeouts (3 s of CPU
// here); the RenderTimeout is wall-clock time, which a worker's start and a
// rendering take several times over on a loaded machine (1 s failed the
// first rendering there), so it is not what this test makes short.
func TestWorkersRetireBeforeTheirCPULimit(t *testing.T) {
	p, started := newPool(t, Options{Workers: 1, RenderTimeout: 3 * time.Second, CPUTime: 9 * time.Second})
	busy := compileOne(t, p, `{{ range until 200000 }}{{ end }}done`)
	deadline := time.Now().Add(2 * time.Minute)
	for renders := 1; len(started.get()) < 3; renders++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d renderings and %d workers: no worker used its CPU", renders, len(started.get()))
		}
		if out, err := busy.Render(context.Background(), render.Data{}); err != nil || out.HAProxyConfig != "done\n" {
			t.Fatalf("rendering %d (worker %d): %q, %v", renders, len(started.get()), out.HAProxyConfig, err)
		}
	}
}

func TestCrashKillsOnlyItsWorker(t *testing.T) {
	p, started := newPool(t, Options{Workers: 2})
	loopCtx, stopLoop := context.WithCancel(context.Background())
	defer stopLoop()
	// Both compiled first, each in a worker of its own (a compile takes
	// a free slot, the unstarted one first): the loop then renders on
	// the first worker, the second template on the second.
	loop := compileOne(t, p, silentLoop)
	second := compileOne(t, p, silentLoop+" ")
	if n := len(started.get()); n != 2 {
		t.Fatalf("two compiles started %d workers, want 2", n)
	}
	loopDone := make(chan error, 1)
	go func() {
		_, err := loop.Render(loopCtx, render.Data{})
		loopDone <- err
	}()
	waitFor(t, 30*time.Second, "rendering the loop", func() bool { return p.busy() == 1 })

	// The engine refuses what used to crash a worker (a cyclic dict
	// printed: a fatal stack overflow), so the crash is played from
	// outside: the second worker dies of a signal while it renders.
	crashed := make(chan error, 1)
	go func() {
		_, err := second.Render(context.Background(), render.Data{})
		crashed <- err
	}()
	waitFor(t, 30*time.Second, "rendering on the second worker", func() bool { return len(started.get()) == 2 && p.busy() == 2 })
	if err := syscall.Kill(started.get()[1], syscall.SIGSEGV); err != nil {
		t.Fatal(err)
	}
	err := <-crashed
	var died *ProcessDiedError
	if !errors.As(err, &died) || !strings.HasPrefix(err.Error(), "the rendering process died: ") || !strings.Contains(err.Error(), "SIGSEGV") && !strings.Contains(err.Error(), "segmentation fault") {
		t.Fatalf("error %v, want the process death of a SIGSEGV", err)
	}
	pids := started.get()
	if len(pids) != 2 || !gone(pids[1]) || gone(pids[0]) {
		t.Fatalf("workers %v: the crashed one must be gone, the looping one alive", pids)
	}
	select {
	case err := <-loopDone:
		t.Fatalf("the other rendering ended with the crash: %v", err)
	default:
	}
	stopLoop()
	if err := <-loopDone; !errors.Is(err, context.Canceled) {
		t.Errorf("the looping rendering ended with %v, want its context's cancellation", err)
	}
	if out, err := compileOne(t, p, "ok").Render(context.Background(), render.Data{}); err != nil || out.HAProxyConfig != "ok\n" {
		t.Errorf("after the crash: %q, %v", out.HAProxyConfig, err)
	}
}

func TestStoresAreResentOnlyWhenChanged(t *testing.T) {
	byNsName := mustIndexer(t, "metadata.namespace", "metadata.name")
	var objects []map[string]any
	for i := range 200 {
		objects = append(objects, decodeJSON(t, fmt.Sprintf(`{"metadata": {"namespace": "ns", "name": "obj-%03d"}, "data": {"padding": %q}}`, i, strings.Repeat("p", 100))))
	}
	big := mustStore(t, byNsName, objects...)
	small := mustStore(t, byNsName, decodeJSON(t, `{"metadata": {"namespace": "ns", "name": "only"}}`))
	data := func(bigStore render.Store) render.Data {
		return render.Data{Resources: map[string]render.Store{"big": bigStore, "small": small, "again": small}}
	}
	p, _ := newPool(t, Options{Workers: 1})
	inProcess, pooled := compileBoth(t, p, render.Templates{HAProxyConfig: `{{ range .resources.big.List }}{{ .metadata.name }} {{ end }}| {{ range .resources.small.List }}{{ .metadata.name }}{{ end }} {{ len .resources.again.List }}`})

	step := func(what string, bigStore render.Store, wantSnapshots int64) (requestBytes int64) {
		t.Helper()
		before := p.stats.requestBytes.Load()
		if _, err := renderAlike(t, inProcess, pooled, data(bigStore)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := p.stats.snapshots.Load(); got != wantSnapshots {
			t.Errorf("%s: %d snapshots sent in all, want %d", what, got, wantSnapshots)
		}
		return p.stats.requestBytes.Load() - before
	}
	first := step("first rendering", big, 2) // small once, though named twice
	if again := step("same stores", big, 2); again*20 > first {
		t.Errorf("rendering unchanged stores sent %d bytes, the first rendering %d", again, first)
	}
	added := decodeJSON(t, `{"metadata": {"namespace": "ns", "name": "added"}}`)
	if overlaid := step("an overlay", mustOverlay(t, big, render.OperationCreate, added), 2); overlaid*20 > first {
		t.Errorf("an overlay sent %d bytes, the first rendering %d", overlaid, first)
	}
	if err := big.Upsert(added); err != nil {
		t.Fatal(err)
	}
	step("after an Upsert", big, 3)
	big.Delete("ns", "obj-007")
	step("after a Delete", big, 4)
	step("an overlay after a Delete", mustOverlay(t, big, render.OperationDelete, objects[8]), 4)

	// A killed worker's replacement gets everything again.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := compileOne(t, p, silentLoop).Render(ctx, render.Data{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	step("on a new worker", big, 6)
}

func TestWorkersForgetWhatExceedsTheirShare(t *testing.T) {
	byNsName := mustIndexer(t, "metadata.namespace", "metadata.name")
	stores := make([]*render.MemoryStore, 3)
	for i := range stores {
		stores[i] = mustStore(t, byNsName, decodeJSON(t, fmt.Sprintf(`{"metadata": {"namespace": "ns", "name": "in-store-%d"}}`, i)))
	}
	p, _ := newPool(t, Options{Workers: 1})
	p.storeCacheBytes = 1 // no room but for the stores a rendering names

	renderers := make([][2]render.Renderer, maxHeldTemplates+2)
	for i := range renderers {
		inProcess, pooled := compileBoth(t, p, render.Templates{HAProxyConfig: fmt.Sprintf(`set %d: {{ range .resources.s.List }}{{ .metadata.name }}{{ end }}`, i)})
		renderers[i] = [2]render.Renderer{inProcess, pooled}
	}
	var sent int64
	for round := range 2 {
		for i, r := range renderers {
			store := stores[(round+i)%len(stores)]
			if _, err := renderAlike(t, r[0], r[1], render.Data{Resources: map[string]render.Store{"s": store}}); err != nil {
				t.Fatal(err)
			}
			if sent++; p.stats.snapshots.Load() != sent {
				t.Fatalf("%d snapshots sent, want %d: each rendering must resend its store", p.stats.snapshots.Load(), sent)
			}
			w := <-p.slots
			held := slices.Collect(func(yield func(uint64) bool) {
				for id := range w.stores {
					yield(id)
				}
			})
			templates := len(w.templates)
			p.slots <- w
			if want := []uint64{store.Snapshot().ID}; !slices.Equal(held, want) {
				t.Fatalf("the worker holds stores %v, want only %v", held, want)
			}
			if templates > maxHeldTemplates {
				t.Fatalf("the worker holds %d template sets", templates)
			}
		}
	}
}

func TestWorkersRenderInParallelAndMoreWait(t *testing.T) {
	p, started := newPool(t, Options{Workers: 2})
	loop := compileOne(t, p, silentLoop)
	type rendering struct {
		stop context.CancelFunc
		done chan error
	}
	start := func(ctx context.Context) rendering {
		ctx, cancel := context.WithCancel(ctx)
		r := rendering{stop: cancel, done: make(chan error, 1)}
		go func() {
			_, err := loop.Render(ctx, render.Data{})
			r.done <- err
		}()
		return r
	}
	a, b := start(context.Background()), start(context.Background())
	defer a.stop()
	defer b.stop()
	waitFor(t, 30*time.Second, "two renderings in two workers", func() bool { return p.busy() == 2 && len(started.get()) == 2 })
	c := start(context.Background())
	defer c.stop()
	waitFor(t, 30*time.Second, "a third rendering waiting", func() bool { return p.stats.waiting.Load() == 1 })
	workers := started.get()
	if gone(workers[0]) || gone(workers[1]) || len(workers) != 2 {
		t.Fatalf("workers %v, want two running", workers)
	}

	// One waiting with a deadline gives up at it, starting nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := loop.Render(ctx, render.Data{})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "waiting for a free rendering process") {
		t.Errorf("waiting: %v", err)
	}

	// When a rendering ends, the waiting one runs, in a new worker.
	a.stop()
	if err := <-a.done; !errors.Is(err, context.Canceled) {
		t.Errorf("a: %v", err)
	}
	waitFor(t, 30*time.Second, "the waiting rendering running", func() bool {
		return p.stats.waiting.Load() == 0 && p.busy() == 2 && len(started.get()) == 3
	})
	b.stop()
	c.stop()
	for _, r := range []rendering{b, c} {
		if err := <-r.done; !errors.Is(err, context.Canceled) {
			t.Errorf("%v", err)
		}
	}
	for _, pid := range started.get() {
		waitFor(t, time.Second, fmt.Sprintf("worker %d gone", pid), func() bool { return gone(pid) })
	}
}

// TestHostileWorkerCannotMakeTheServerAllocate has workers that break the
// protocol; the server reads no more than an answer's budget.
func TestHostileWorkerCannotMakeTheServerAllocate(t *testing.T) {
	for _, tt := range []struct {
		name, script, want string
	}{
		{"announces 4 GiB", `printf '\377\377\377\377'; exec sleep 60`,
			"the rendering process broke the protocol: its answer announced a message of 4294967295 bytes, more than the"},
		{"answers nonsense", `printf '\000\000\000\004null'; exec sleep 60`, "the rendering process answered nonsense"},
		{"answers half", `printf '\000\000\001\000abc'; exit 0`, "the rendering process died: exit status 0"},
		{"exits", `exit 7`, "the rendering process died: exit status 7"},
		{"writes a fatal error", `echo 'fatal error: out of memory' >&2; exit 2`, "the rendering exceeded its memory budget of 64 MiB"},
	} {
		for _, step := range []string{"compile", "render"} {
			t.Run(tt.name+" to a "+step, func(t *testing.T) {
				p, started := newPool(t, Options{Workers: 1, MemoryLimit: 64 << 20, Command: func(ctx context.Context) (*exec.Cmd, error) {
					return exec.CommandContext(ctx, "/bin/sh", "-c", tt.script), nil
				}})
				var err error
				if step == "compile" {
					_, err = p.Compile(t.Context(), render.Templates{HAProxyConfig: "x"}, "")
					var notCompiled *NotCompiledError
					if !errors.As(err, &notCompiled) {
						t.Errorf("error %v: not a NotCompiledError", err)
					}
				} else {
					// As if a worker had compiled it: the render is the
					// first request the hostile one answers.
					templates := render.Templates{HAProxyConfig: "x"}
					r := &renderer{pool: p, hash: templatesHash("", templates), templates: toWireTemplates("", templates), answerLimit: 1 << 20}
					_, err = r.Render(context.Background(), render.Data{})
				}
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %v, want %q", err, tt.want)
				}
				if pid := started.get()[0]; !gone(pid) {
					t.Errorf("the worker %d is still there", pid)
				}
			})
		}
	}
}

func TestDefaultWorkerIsConfined(t *testing.T) {
	t.Setenv("GATEHOUSE_RENDERPROC_TEST_SECRET", "hunter2")
	p, started := newPool(t, Options{Workers: 1, MemoryLimit: 256 << 20, CPUTime: 5 * time.Minute, Nice: 7})
	if _, err := compileOne(t, p, "ok").Render(context.Background(), render.Data{}); err != nil {
		t.Fatal(err)
	}
	pid := started.get()[0]

	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	if env := strings.Split(strings.TrimSuffix(string(environ), "\x00"), "\x00"); !slices.Equal(env, []string{"GOMAXPROCS=1"}) {
		t.Errorf("worker environment %q", env)
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || cwd != p.emptyDir {
		t.Errorf("worker directory %q (%v), want the pool's empty directory %s", cwd, err, p.emptyDir)
	} else if entries, err := os.ReadDir(cwd); err != nil || len(entries) > 0 {
		t.Errorf("worker directory holds %v (%v)", entries, err)
	}

	limits := map[string][]string{}
	for _, line := range procLines(t, pid, "limits") {
		if name, rest, ok := strings.Cut(line, "  "); ok {
			limits[name] = strings.Fields(rest)
		}
	}
	if cpu := limits["Max cpu time"]; len(cpu) < 2 || cpu[0] != "300" || cpu[1] != "300" {
		t.Errorf("RLIMIT_CPU %q", cpu)
	}
	// The budget bounds private writable memory (RLIMIT_DATA) beyond what
	// the runtime needs to start; RLIMIT_AS is erratic for Go.
	want := strconv.FormatInt(workerStartData+256<<20, 10)
	if data := limits["Max data size"]; len(data) < 2 || data[0] != want || data[1] != want {
		t.Errorf("RLIMIT_DATA %q, want %s", data, want)
	}

	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatal(tasks, err)
	}
	// Fields after "(comm)": state is field 3, pgrp 5, nice 19.
	statFields := func(path string) []string {
		stat, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	}
	// The workers' niceness is 7 more than the pool's own (the test's,
	// which a busy machine's CI may run niced), at most 19.
	own, err := strconv.Atoi(statFields("/proc/self/stat")[19-3])
	if err != nil {
		t.Fatal(err)
	}
	wantNice := strconv.Itoa(min(own+7, 19))
	for _, task := range tasks {
		fields := statFields(task)
		if fields[19-3] != wantNice || fields[5-3] != strconv.Itoa(pid) {
			t.Errorf("thread %s: nice %s, process group %s; want %s and its own", task, fields[19-3], fields[5-3], wantNice)
		}
	}
}

func TestCloseKillsTheWorkers(t *testing.T) {
	p, started := newPool(t, Options{Workers: 2})
	if _, err := compileOne(t, p, "ok").Render(context.Background(), render.Data{}); err != nil {
		t.Fatal(err)
	}
	loopDone := make(chan error, 1)
	loop := compileOne(t, p, silentLoop)
	go func() {
		_, err := loop.Render(context.Background(), render.Data{})
		loopDone <- err
	}()
	waitFor(t, 30*time.Second, "rendering the loop", func() bool { return p.busy() == 1 && len(started.get()) == 2 })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-loopDone; !errors.Is(err, ErrClosed) {
		t.Errorf("the rendering in progress: %v", err)
	}
	for _, pid := range started.get() {
		if !gone(pid) {
			t.Errorf("worker %d outlived Close", pid)
		}
	}
	if _, err := compileOne(t, p, "ok").Render(context.Background(), render.Data{}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	for _, opts := range []Options{
		{Workers: -1},
		{MemoryLimit: 1 << 20},
		{Nice: 20},
		{Nice: -5},
		{RenderTimeout: time.Minute, CPUTime: 2 * time.Minute},
		{MaxOutputBytes: 100},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("%+v accepted", opts)
		}
	}
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.opts.Workers != 2 || p.opts.MemoryLimit != 512<<20 || p.opts.Nice != 10 || p.opts.CPUTime != 10*time.Minute {
		t.Errorf("defaults %+v", p.opts)
	}
}

// The benchmarks render the example config over 1,000 Ingresses with an
// overlay per rendering, as admission does:
//
//	go test -run '^$' -bench 'Render(InProcess|Pool)' ./internal/configcheck/renderproc
//
// BenchmarkRenderPool times the in-process rendering in the same run and
// reports its own time as a multiple of it (x-in-process). A worker renders
// on one core (GOMAXPROCS=1) where the in-process renderer renders the
// outputs in parallel, so on several idle cores most of the ratio is that;
// -cpu 1 compares like with like. BenchmarkRenderPoolSmall does the same
// over 10 Ingresses, where the round trip is most of the cost.
func benchRenderers(b *testing.B, p *Pool, ingresses int) (inProcess, pooled render.Renderer, data func(i int) render.Data) {
	templates, indexers := exampleConfig(b)
	ingressObjects, serviceObjects := exampleObjects(b, ingresses)
	ingressStore := mustStore(b, indexers["ingresses"], ingressObjects...)
	serviceStore := mustStore(b, indexers["services"], serviceObjects...)
	inProcess, pooled = compileBoth(b, p, templates)
	return inProcess, pooled, func(i int) render.Data {
		proposed := decodeJSON(b, fmt.Sprintf(`{"metadata": {"namespace": "team-01", "name": "bench-%d"}, "spec": {"rules": [
			{"host": "bench-%d.example", "http": {"paths": [{"path": "/", "backend": {"service": {"name": "svc-0005", "port": {"number": 80}}}}]}}]}}`, i, i))
		return render.Data{Resources: map[string]render.Store{
			"ingresses": mustOverlay(b, ingressStore, render.OperationCreate, proposed),
			"services":  serviceStore,
		}}
	}
}

func benchLoop(b *testing.B, r render.Renderer, data func(int) render.Data) {
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if _, err := r.Render(ctx, data(i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderInProcess(b *testing.B) {
	p, _ := newPool(b, Options{})
	inProcess, _, data := benchRenderers(b, p, 1000)
	b.ReportAllocs()
	benchLoop(b, inProcess, data)
}

func BenchmarkRenderPool(b *testing.B) {
	benchPoolAgainstInProcess(b, 1000)
}

func BenchmarkRenderPoolSmall(b *testing.B) {
	benchPoolAgainstInProcess(b, 10)
}

func benchPoolAgainstInProcess(b *testing.B, ingresses int) {
	p, _ := newPool(b, Options{})
	inProcess, pooled, data := benchRenderers(b, p, ingresses)
	// testing.Benchmark cannot run inside a benchmark (they share a lock),
	// so the baseline is timed here, before b.Loop starts the clock.
	start, n := time.Now(), 0
	for n < 20 || time.Since(start) < time.Second {
		n++
		if _, err := inProcess.Render(context.Background(), data(n)); err != nil {
			b.Fatal(err)
		}
	}
	baseline := float64(time.Since(start)) / float64(n)
	b.ReportAllocs()
	benchLoop(b, pooled, data)
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/baseline, "x-in-process")
}

// TestDryRunsLeaveAWorkerToRealChanges: an author's dry runs of a template
// that never ends take one of the two workers, the next waits its turn,
// one more is refused at once; another config's real change renders on
// the worker left.
func TestDryRunsLeaveAWorkerToRealChanges(t *testing.T) {
	p, _ := newPool(t, Options{Workers: 2, MaxWaiting: 1})
	loop := compileOne(t, p, silentLoop)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dryRun := fair.WithShare(ctx, "the author's namespace", fair.DryRun)
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := loop.Render(dryRun, render.Data{})
			done <- err
		}()
	}
	waitFor(t, 30*time.Second, "one dry run rendering, one waiting", func() bool {
		return p.busy() == 1 && p.turns.Waiting() == 1
	})
	_, err := loop.Render(dryRun, render.Data{})
	if !errors.Is(err, fair.ErrFull) || !strings.Contains(err.Error(), "the author's namespace already has 1 waiting") {
		t.Fatalf("a third dry run: %v; want it refused at once", err)
	}
	out, err := compileOne(t, p, "real").Render(fair.WithShare(ctx, "another config", fair.Real), render.Data{})
	if err != nil || strings.TrimSpace(out.HAProxyConfig) != "real" {
		t.Fatalf("another config's real change beside the dry runs: %q, %v", out.HAProxyConfig, err)
	}
	cancel()
	for range 2 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("a dry run: %v", err)
		}
	}
}

// TestPostProcessingRunsInTheWorker: a config's post-processing travels to
// the worker with its templates and applies there; the same templates
// without it are another set (not a worker's cached compile of the first).
func TestPostProcessingRunsInTheWorker(t *testing.T) {
	p, _ := newPool(t, Options{Workers: 1})
	templates := render.Templates{HAProxyConfig: "global\n      daemon\n"}
	plain, err := p.Compile(t.Context(), templates, "")
	if err != nil {
		t.Fatal(err)
	}
	templates.PostProcessing = map[string][]render.PostProcessor{"haproxyConfig": {{Type: render.PostProcessorRegexReplace, Pattern: `^[ ]+`, Replace: "  "}}}
	processed, err := p.Compile(t.Context(), templates, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r    render.Renderer
		want string
	}{{plain, "global\n      daemon\n"}, {processed, "global\n  daemon\n"}, {plain, "global\n      daemon\n"}} {
		out, err := c.r.Render(context.Background(), render.Data{})
		if err != nil {
			t.Fatal(err)
		}
		if out.HAProxyConfig != c.want {
			t.Errorf("rendered %q, want %q", out.HAProxyConfig, c.want)
		}
	}
}

// TestCompileIsBoundedLikeARendering is a config author's attack on the
// compile: a Scriggo template needing a build per loosely typed
// expression, thousands of them (half a minute of CPU). The compile runs
// in a worker, so the pool's time budget stops it as it stops a
// rendering; the error says the templates were not compiled (nothing
// against them, so a reconciler tries again rather than marking the
// config invalid), and the pool goes on serving another config.
func TestCompileIsBoundedLikeARendering(t *testing.T) {
	p, started := newPool(t, Options{Workers: 1, RenderTimeout: time.Second})
	var src strings.Builder
	src.WriteString(`{% var x = extraContext | dig("x") %}`)
	for range 2000 {
		src.WriteString(`{{ x["k"] }}`)
	}
	begin := time.Now()
	_, err := p.Compile(t.Context(), render.Templates{HAProxyConfig: src.String()}, "scriggo")
	var notCompiled *NotCompiledError
	var budget *TimeBudgetError
	if !errors.As(err, &notCompiled) || !errors.As(err, &budget) {
		t.Fatalf("compile: %v, want it stopped at the time budget", err)
	}
	if elapsed := time.Since(begin); elapsed > 20*time.Second {
		t.Errorf("the compile returned after %v, long past its budget of 1s", elapsed)
	}
	if pid := started.get()[0]; !gone(pid) {
		t.Errorf("the compiling worker %d is still there", pid)
	}
	out, err := compileOne(t, p, "ok").Render(t.Context(), render.Data{})
	if err != nil || out.HAProxyConfig != "ok\n" {
		t.Fatalf("another config after the stopped compile: %q, %v", out.HAProxyConfig, err)
	}
}

// TestWorkersCompileFromWhatTheFirstLearned: a Scriggo compile's repairs
// travel with the templates, so a second worker's compile of them is one
// build per output; both render alike.
func TestWorkersCompileFromWhatTheFirstLearned(t *testing.T) {
	p, _ := newPool(t, Options{Workers: 2})
	templates := render.Templates{HAProxyConfig: `{% var route = extraContext | dig("route") %}{{ route["weight"] + 1 }}`}
	r, err := p.Compile(t.Context(), templates, "scriggo")
	if err != nil {
		t.Fatal(err)
	}
	if learned := r.(*renderer).templates.Learned; len(learned) == 0 {
		t.Fatal("the compile learned nothing to pass on")
	}
	data := render.Data{ExtraContext: map[string]any{"route": map[string]any{"weight": int64(2)}}}
	// Two renderings at once: the second worker compiles from what the
	// first learned.
	results := make(chan string, 2)
	for range 2 {
		go func() {
			out, err := r.Render(context.Background(), data)
			results <- fmt.Sprint(out.HAProxyConfig, err)
		}()
	}
	for range 2 {
		if got := <-results; got != "3\n<nil>" {
			t.Errorf("rendered %q, want 3", got)
		}
	}
	if again, err := p.Compile(t.Context(), templates, "scriggo"); err != nil || again != r {
		t.Errorf("compiled again: %v, %v; want the kept renderer", again, err)
	}
}
