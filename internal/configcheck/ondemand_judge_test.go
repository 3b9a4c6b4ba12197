package configcheck

import (
	"context"
	"errors"
	"strings"
	"testing"

	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/ondemand"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// TestOnDemandFetchErrorsLeaveTheDecisionUndecided: an API server that
// cannot answer whether a Secret exists never turns into a denial for a
// missing Secret.
func TestOnDemandFetchErrorsLeaveTheDecisionUndecided(t *testing.T) {
	c, errs := spec.CompileHaptic(&hapticv1alpha1.HAProxyTemplateConfigSpec{
		WatchedResources: map[string]hapticv1alpha1.WatchedResource{
			"secrets": {APIVersion: "v1", Resources: "secrets", IndexBy: []string{"metadata.namespace", "metadata.name"}, Store: "on-demand"},
		},
		HAProxyConfig: hapticv1alpha1.Template{Template: `{% var s = resources.secrets.GetSingle("team-a", "cert") %}global` + "\n"},
	}, inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	refused := func(context.Context, *spec.Watched, string, string) (map[string]any, error) {
		return nil, errors.New("connection refused")
	}
	set, err := ondemand.NewSet(c, refused, true)
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]render.IndexedStore{}
	set.AddStores(stores)
	m := &Module{}
	v := m.judge(ondemand.WithSet(t.Context(), set), c, judge.DataOf(stores), "")
	if v.Denial != "" || !strings.Contains(v.Undecided, "could not be fetched: connection refused") {
		t.Fatalf("verdict %+v, want undecided", v)
	}
}
