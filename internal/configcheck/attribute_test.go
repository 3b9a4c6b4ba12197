package configcheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// TestAttributeNamesWhatFails puts back each object changed since the last
// state that passed, with the real haproxy: the three Ingresses declaring
// one backend are named, the unrelated new one and the unchanged one are
// not.
func TestAttributeNamesWhatFails(t *testing.T) {
	c, errs := spec.Compile(judgeSpec(), inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	w := c.Watched["ingresses"]
	store := func(objs ...map[string]any) map[string]render.IndexedStore {
		s, err := render.NewMemoryStore(w.Indexer, objs...)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]render.IndexedStore{"ingresses": s}
	}
	fine := w.Stored(ingressWithLine("fine", "http-request set-header X-fine v"))
	good := judge.SnapshotOf(store(fine))
	now := store(fine,
		w.Stored(ingressWithLine("dup-1", "backend dup")), w.Stored(ingressWithLine("dup-2", "backend dup")),
		w.Stored(ingressWithLine("dup-3", "backend dup")), w.Stored(ingressWithLine("unrelated", "http-request set-header X-u v")))

	m := &Module{checker: testChecker(t, nil)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	current := m.judge(ctx, c, judge.DataOf(now), "")
	if current.Phase != judge.PhaseHAProxy || len(current.Alerts.Keys) != 2 {
		t.Fatalf("the state must fail haproxy -c with two duplicate alerts: %+v", current)
	}
	suspects := judge.ChangedSince(good, now)
	if len(suspects) != 4 {
		t.Fatalf("suspects %v: want the four new Ingresses", suspects)
	}
	a := judge.Attribute(ctx, m.checker, c, now, current, suspects)
	var got []string
	for _, s := range a.Culprits {
		got = append(got, s.String())
	}
	want := []string{"ingresses app/dup-1 (new)", "ingresses app/dup-2 (new)", "ingresses app/dup-3 (new)"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("culprits %v, want %v", got, want)
	}
	if msg := a.Message(); !strings.HasPrefix(msg, "caused by ingresses app/dup-1 (new), ingresses app/dup-2 (new), ingresses app/dup-3 (new)") {
		t.Fatalf("message %q", msg)
	}

	t.Run("a deleted object a render needs is named", func(t *testing.T) {
		before := store(fine, w.Stored(ingressWithLine("gone", "http-request set-header X-g v")))
		after := store(fine, w.Stored(ingressWithLine("refused", "")))
		suspects := judge.ChangedSince(judge.SnapshotOf(before), after)
		if len(suspects) != 2 || suspects[0].String() != "ingresses app/gone (deleted)" || suspects[1].String() != "ingresses app/refused (new)" {
			t.Fatalf("suspects %v", suspects)
		}
		current := m.judge(ctx, c, judge.DataOf(after), "")
		a := judge.Attribute(ctx, m.checker, c, after, current, suspects)
		if len(a.Culprits) != 1 || a.Culprits[0].Name != "refused" {
			t.Fatalf("culprits %v: want the Ingress the template refuses", a.Culprits)
		}
	})
}
