package placement

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/module/moduletest"
)

// Anyone who may create a Pod names any owner kind: only a kind the API
// server serves and Gatehouse may list takes a slot, and a full table
// leaves the Pod undecided rather than judged without the owner.
func TestOwnerKindSlots(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	database := schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Database"}
	queue := schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Queue"}
	for _, gvk := range []schema.GroupVersionKind{database, queue} {
		scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
	}
	opts := Options{MaxOwnerKinds: len(workloadKinds) + 1}
	opts.setDefaults()
	host := moduletest.New(scheme)
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	// The host finds Gatehouse may not list and watch Secrets.
	host.KindStates[secret] = module.KindForbidden
	o, err := newOwnerCache(host, opts)
	if err != nil {
		t.Fatal(err)
	}
	followed := func(gvk schema.GroupVersionKind) int {
		n := 0
		for _, obj := range host.Followed {
			if obj.GetObjectKind().GroupVersionKind() == gvk {
				n++
			}
		}
		return n
	}

	if _, err := o.follow(context.Background(), schema.GroupVersionKind{Group: "invented.example.com", Version: "v1", Kind: "Squatter"}); err == nil || !strings.Contains(err.Error(), "is not served by the API server") {
		t.Fatalf("an invented kind: %v", err)
	}
	for range 2 {
		if _, err := o.follow(context.Background(), secret); err == nil || !strings.Contains(err.Error(), "may not list and watch secrets") {
			t.Fatalf("a kind Gatehouse may not list: %v", err)
		}
	}
	if followed(secret) != 1 || host.Released[secret] != 1 {
		t.Fatalf("secrets followed %d times and released %d times, want once each until the retry", followed(secret), host.Released[secret])
	}
	if len(o.kinds) != len(workloadKinds) {
		t.Fatalf("%d kinds followed after refusals, want %d", len(o.kinds), len(workloadKinds))
	}
	if _, err := o.startFollowing(context.Background(), database); err != nil {
		t.Fatalf("a served, listable kind: %v", err)
	}
	refused := testutil.ToFloat64(ownerKindsRefused)
	_, err = o.startFollowing(context.Background(), queue)
	if !errors.Is(err, errOwnerKindsExhausted) {
		t.Fatalf("a kind beyond the bound: %v", err)
	}
	if got := testutil.ToFloat64(ownerKindsRefused); got != refused+1 {
		t.Fatalf("gatehouse_placement_owner_kinds_refused_total went from %v to %v", refused, got)
	}
}

// A lineage through a kind beyond the bound is undecided, never judged on
// the rest.
func TestExhaustedOwnerKindIsUndecided(t *testing.T) {
	m := podModule()
	m.owners = exhaustedOwners{}
	v := m.decidePod(context.Background(), m.view, "app", podOf("pg-", nil, ref("Database", "pg", "p1")))
	if !errors.Is(v.Err, errOwnerKindsExhausted) {
		t.Fatalf("verdict %+v, want undecided", v)
	}
}

type exhaustedOwners struct{}

func (exhaustedOwners) Owner(context.Context, string, metav1.OwnerReference) (metav1.Object, bool, error) {
	return nil, false, errOwnerKindsExhausted
}

// servedHost is a test host whose served kinds the test chooses.
type servedHost struct {
	*moduletest.Host
	served map[schema.GroupVersionKind]bool
}

func (h servedHost) Served(gvk schema.GroupVersionKind) bool { return h.served[gvk] }

// A kind that will not become readable is answered at once: a kind no
// longer served without a wait, and a kind whose informer does not sync
// after one wait (issue 17, item 5).
func TestUnreadableOwnerKindsAreAnsweredAtOnce(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	database := schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Database"}
	scheme.AddKnownTypeWithName(database, &unstructured.Unstructured{})
	host := servedHost{Host: moduletest.New(scheme), served: map[schema.GroupVersionKind]bool{database: true}}
	// The host never learns the kind's state: its informer does not sync.
	host.KindStates[database] = module.KindPending
	opts := Options{OwnerWait: 50 * time.Millisecond}
	opts.setDefaults()
	o, err := newOwnerCache(host, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waits := func() float64 {
		return testutil.ToFloat64(ownerWaits.WithLabelValues("timed-out")) + testutil.ToFloat64(ownerWaits.WithLabelValues("synced"))
	}
	unfollowed := func(reason string) float64 { return testutil.ToFloat64(ownerLinksUnfollowed.WithLabelValues(reason)) }

	// The test host's informers never sync: the first Pod waits once.
	before := waits()
	if _, err := o.follow(ctx, database); !errors.Is(err, errKindNotSynced) {
		t.Fatalf("a kind whose informer does not sync: %v", err)
	}
	if got := waits(); got != before+1 {
		t.Fatalf("the first decision should wait once for the informer: waits went from %v to %v", before, got)
	}
	notSynced := unfollowed("not-synced")
	for range 3 {
		if _, err := o.follow(ctx, database); !errors.Is(err, errKindNotSynced) {
			t.Fatalf("a kind that timed out: %v", err)
		}
	}
	if got := waits(); got != before+1 {
		t.Fatalf("later decisions waited again for a kind that timed out: waits %v, want %v", got, before+1)
	}
	if got := unfollowed("not-synced"); got != notSynced+3 {
		t.Fatalf("not-synced links counted %v, want %v", got, notSynced+3)
	}

	// Its CRD removed: not served, answered without a wait.
	host.served[database] = false
	notServed := unfollowed("not-served")
	if _, err := o.follow(ctx, database); !errors.Is(err, errKindNotServed) {
		t.Fatalf("a followed kind no longer served: %v", err)
	}
	if got := waits(); got != before+1 {
		t.Fatal("a kind no longer served was waited for")
	}
	if got := unfollowed("not-served"); got != notServed+1 {
		t.Fatalf("not-served links counted %v, want %v", got, notServed+1)
	}
	if o.logged[database] != "not-served" {
		t.Fatalf("logged reasons %v", o.logged)
	}
}
