package renderproc

import (
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// TestMissesCrossFromTheWorker: the whole keys a worker's rendering asked
// of an on-demand store and did not find come back with the answer, with
// an output and with a template's failure alike; a store not named on
// demand reports nothing, and neither does a rendering without a
// collector.
func TestMissesCrossFromTheWorker(t *testing.T) {
	p, _ := newPool(t, Options{Workers: 1})
	r := compileOne(t, p, `{{ $s := .resources.secrets.GetSingle "team-a" "cert" }}{{ $o := .resources.others.GetSingle "team-a" "x" }}`+
		`{{ $part := .resources.secrets.Fetch "team-a" }}{{ if .extraContext.fail }}{{ fail "no cert" }}{{ end }}global`)
	indexer := mustIndexer(t, "metadata.namespace", "metadata.name")
	held := map[string]any{"metadata": map[string]any{"namespace": "team-a", "name": "held"}}
	data := func(fail bool) render.Data {
		return render.Data{
			Resources:    map[string]render.Store{"secrets": mustStore(t, indexer, held), "others": mustStore(t, indexer)},
			ExtraContext: map[string]any{"fail": fail},
			OnDemand:     map[string]bool{"secrets": true},
			Missed:       &render.Missed{},
		}
	}
	for _, fail := range []bool{false, true} {
		d := data(fail)
		_, err := r.Render(t.Context(), d)
		if fail != (err != nil && strings.Contains(err.Error(), "no cert")) {
			t.Fatalf("fail %v: %v", fail, err)
		}
		got := d.Missed.Keys()
		if len(got) != 1 || len(got["secrets"]) != 1 || strings.Join(got["secrets"][0], "/") != "team-a/cert" {
			t.Errorf("fail %v: missed %v, want secrets team-a/cert alone", fail, got)
		}
	}
	d := data(false)
	d.Missed = nil
	if _, err := r.Render(t.Context(), d); err != nil {
		t.Fatal(err)
	}
}

// TestWorkersMissesAreBounded: what a worker reports missed is what its
// author's templates made of it; the parent keeps only the stores it named
// on demand and keys within bounds, before anything is fetched for them.
func TestWorkersMissesAreBounded(t *testing.T) {
	data := render.Data{OnDemand: map[string]bool{"secrets": true}, Missed: &render.Missed{}}
	long := strings.Repeat("x", maxMissedKeyLen+1)
	collectMissed(data, map[string][][]string{
		"secrets":  {{"team-a", "cert"}, {"team-a", long}, {}, {"a", "b", "c", "d", "e", "f", "g", "h", "i"}},
		"services": {{"team-a", "api"}},
	})
	many := map[string][][]string{"secrets": nil}
	for i := range render.MaxMissed + 10 {
		many["secrets"] = append(many["secrets"], []string{"team-b", strings.Repeat("n", i+1)})
	}
	collectMissed(data, many)
	got := data.Missed.Keys()
	if len(got) != 1 || len(got["secrets"]) != render.MaxMissed || !data.Missed.Overflowed() {
		t.Fatalf("kept %d keys of %v (overflowed %v), want %d of secrets", len(got["secrets"]), len(got), data.Missed.Overflowed(), render.MaxMissed)
	}
	for _, keys := range got["secrets"] {
		if len(keys) != 2 || len(keys[1]) > maxMissedKeyLen {
			t.Fatalf("kept %v", keys)
		}
	}
}
