package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	ngv1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha2"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/nodegroup"
	"github.com/gatehouse-dev/gatehouse/internal/testing/clustertest"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// The listing benchmark stores 1,000 NodeGroups and lists them alternately
// through v1, the stored version, and v1alpha1, which Gatehouse converts.
// It reports both times, their ratio, and how often the API server called
// the conversion webhook per write and per list: kube-apiserver 1.37
// converts an object to every served version when it is written and
// answers later LISTs without calling the webhook.
//
//	go test ./test/bench -run '^$' -bench NodeGroupList -benchtime 20x
func BenchmarkNodeGroupList1000(b *testing.B) {
	// The manager builds clients on controller-runtime's global logger,
	// which, never set, prints a stack trace into the benchmark's result
	// line once the process is 30 seconds old.
	ctrllog.SetLogger(logr.New(ctrllog.NullLogSink{}))
	c := startNodeGroupBench(b)
	ctx := context.Background()
	const groups = 1000
	conversions := metrics.Requests.WithLabelValues(nodegroup.ConversionName, "nodegroup", "CONVERT", metrics.DecisionAllowed)
	callsBeforeCreate := promtestutil.ToFloat64(conversions)
	for i := range groups {
		ng := &ngv1.NodeGroup{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%04d", i), Labels: map[string]string{"bench": "list"}},
			Spec: ngv1.NodeGroupSpec{
				NodeType:       []ngv1.NodeType{ngv1.NodeTypeCloudEphemeral, ngv1.NodeTypeCloudPermanent}[i%2],
				CloudInstances: &ngv1.CloudInstancesSpec{MinPerZone: 1, MaxPerZone: 3, Zones: []string{"nova"}, ClassReference: clustertest.NodeGroupClassRef()},
				CRI:            &ngv1.CRISpec{Type: ngv1.CRITypeContainerd},
				NodeTemplate:   &ngv1.NodeTemplate{Labels: map[string]string{"role": "worker"}, Taints: []ngv1.Taint{{Key: "dedicated", Value: "worker", Effect: "NoSchedule"}}},
				Disruptions:    &ngv1.DisruptionsSpec{ApprovalMode: ngv1.ApprovalModeAutomatic},
			},
		}
		if err := c.Create(ctx, ng); err != nil {
			b.Fatal(err)
		}
	}
	callsAfterCreate := promtestutil.ToFloat64(conversions)
	b.Cleanup(func() {
		if err := c.DeleteAllOf(ctx, &ngv1.NodeGroup{}, client.MatchingLabels{"bench": "list"}); err != nil {
			b.Errorf("delete the benchmark's NodeGroups: %v", err)
		}
	})
	rc, err := rest.RESTClientFor(restConfigForJSON())
	if err != nil {
		b.Fatal(err)
	}
	list := func(version string) time.Duration {
		start := time.Now()
		body, err := rc.Get().AbsPath("/apis/deckhouse.io", version, "nodegroups").Stream(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, body)
		body.Close()
		if err != nil || n == 0 {
			b.Fatalf("list %s: %d bytes, %v", version, n, err)
		}
		return time.Since(start)
	}
	// The list through v1alpha1 must really be converted, or the ratio
	// measures nothing.
	converted := &v1alpha1.NodeGroupList{}
	if err := c.List(ctx, converted, client.MatchingLabels{"bench": "list"}); err != nil {
		b.Fatal(err)
	}
	if len(converted.Items) != groups || converted.Items[0].Spec.NodeType != v1alpha1.NodeTypeCloud || converted.Items[1].Spec.NodeType != v1alpha1.NodeTypeHybrid {
		b.Fatalf("v1alpha1 list: %d items, first types %s %s", len(converted.Items), converted.Items[0].Spec.NodeType, converted.Items[1].Spec.NodeType)
	}
	// One warm-up of each: the first requests pay for connections.
	list("v1")
	list("v1alpha1")
	var v1Total, alpha1Total time.Duration
	callsBefore := promtestutil.ToFloat64(conversions)
	b.ResetTimer()
	for b.Loop() {
		v1Total += list("v1")
		alpha1Total += list("v1alpha1")
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(v1Total.Milliseconds())/n, "v1-ms/list")
	b.ReportMetric(float64(alpha1Total.Milliseconds())/n, "v1alpha1-ms/list")
	b.ReportMetric(float64(alpha1Total)/float64(v1Total), "v1alpha1/v1")
	// Where the API server converts: per write (measured while the groups
	// were created) and per list.
	b.ReportMetric((callsAfterCreate-callsBeforeCreate)/groups, "webhook-calls/write")
	b.ReportMetric((promtestutil.ToFloat64(conversions)-callsBefore)/n, "webhook-calls/list")
}

func restConfigForJSON() *rest.Config {
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.GroupVersion = &ngv1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	cfg.AcceptContentTypes = "application/json"
	cfg.ContentType = "application/json"
	return cfg
}

// startNodeGroupBench starts Gatehouse with the nodegroup module, quiet,
// and returns a client for every NodeGroup version once the API server
// converts and validates through it.
func startNodeGroupBench(b *testing.B) client.Client {
	b.Helper()
	opts := app.Options{
		// Quiet, but set: a benchmark prints everything logged to it, and
		// controller-runtime complains when it finds no logger at all.
		Log:       logr.New(ctrllog.NullLogSink{}),
		Namespace: "gatehouse-e2e",
		Catalogue: []module.Module{nodegroup.New()},
		Modules:   map[string]app.ModuleConfig{"nodegroup": {Enabled: true}},
	}
	c := clustertest.NodeGroupClient(b, controlPlane.Config, nil)
	clustertest.ServeNodeGroups(b, controlPlane, opts, c)
	return c
}

// reviewLog records the ConversionReviews the API server sends: one entry
// per review, its object count and desired version.
type reviewLog struct {
	mu      sync.Mutex
	reviews []observedReview
}

type observedReview struct {
	objects int
	desired string
}

func (l *reviewLog) take() []observedReview {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.reviews
	l.reviews = nil
	return out
}

// countingNodeGroup is the nodegroup module with its conversion wrapped, so
// that a measurement sees every review the API server sends, whatever the
// module's metrics aggregate.
type countingNodeGroup struct {
	*nodegroup.Module
	log *reviewLog
}

func (m countingNodeGroup) Webhooks() []module.Webhook {
	hooks := m.Module.Webhooks()
	for i := range hooks {
		if hooks[i].Convert == nil {
			continue
		}
		convert := hooks[i].Convert
		hooks[i].Convert = func(ctx context.Context, req *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error) {
			m.log.mu.Lock()
			m.log.reviews = append(m.log.reviews, observedReview{objects: len(req.Objects), desired: req.DesiredAPIVersion})
			m.log.mu.Unlock()
			return convert(ctx, req)
		}
	}
	return hooks
}

// summarize reports how many reviews and objects were sent, and the
// largest review.
func summarize(reviews []observedReview) (count, objects, largest int) {
	for _, r := range reviews {
		objects += r.objects
		largest = max(largest, r.objects)
	}
	return len(reviews), objects, largest
}

// waitQuiet waits until no review has arrived for quiet, and returns those
// that did.
func (l *reviewLog) waitQuiet(quiet, limit time.Duration) []observedReview {
	var all []observedReview
	deadline := time.Now().Add(limit)
	last := time.Now()
	for time.Now().Before(deadline) && time.Since(last) < quiet {
		time.Sleep(100 * time.Millisecond)
		if got := l.take(); len(got) > 0 {
			all = append(all, got...)
			last = time.Now()
		}
	}
	return all
}

// BenchmarkNodeGroupReviewsSent measures which ConversionReviews
// kube-apiserver sends, on a control plane of its own so that the restart
// disturbs no other test: per write and read through an old version, and
// while it starts again over 1,000 stored NodeGroups and fills its watch
// caches. It reports counts, not times; run it once.
//
//	go test ./test/bench -run '^$' -bench NodeGroupReviewsSent -benchtime 1x -v
func BenchmarkNodeGroupReviewsSent(b *testing.B) {
	ctrllog.SetLogger(logr.New(ctrllog.NullLogSink{}))
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			b.Errorf("stop the second control plane: %v", err)
		}
	})
	reviews := &reviewLog{}
	g, err := testenv.StartGatehouse(context.Background(), cp, b.TempDir(), app.Options{
		Log:       logr.New(ctrllog.NullLogSink{}),
		Namespace: "gatehouse-e2e",
		Catalogue: []module.Module{countingNodeGroup{Module: nodegroup.New(), log: reviews}},
		Modules:   map[string]app.ModuleConfig{"nodegroup": {Enabled: true}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Stop() })
	ctx := context.Background()
	newClient := func(cfg *rest.Config) client.Client {
		cfg = rest.CopyConfig(cfg)
		cfg.WarningHandler = rest.NoWarnings{}
		cfg.QPS, cfg.Burst = 500, 1000
		c, err := client.New(cfg, client.Options{Scheme: clustertest.NodeGroupScheme})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	c := newClient(cp.Config)
	eventually(b, "the API server converts NodeGroups through Gatehouse", func() error {
		return c.Create(ctx, &v1alpha2.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
			Spec: v1alpha2.NodeGroupSpec{NodeType: v1alpha2.NodeTypeStatic}}, client.DryRunAll)
	})
	reviews.waitQuiet(2*time.Second, 30*time.Second)

	report := func(what string, got []observedReview) {
		n, objects, largest := summarize(got)
		versions := map[string]int{}
		for _, r := range got {
			versions[r.desired]++
		}
		b.Logf("%-58s reviews %5d  objects %5d  largest %4d  by desired version %v", what, n, objects, largest, versions)
	}
	step := func(what string, do func() error) {
		reviews.waitQuiet(time.Second, 10*time.Second)
		if err := do(); err != nil {
			b.Fatalf("%s: %v", what, err)
		}
		report(what, reviews.waitQuiet(2*time.Second, 30*time.Second))
	}
	single := func(name string) *v1alpha1.NodeGroup {
		return &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeGroupSpec{NodeType: v1alpha1.NodeTypeStatic}}
	}
	step("create through v1alpha1", func() error { return c.Create(ctx, single("one")) })
	step("get through v1alpha1", func() error { return c.Get(ctx, client.ObjectKey{Name: "one"}, &v1alpha1.NodeGroup{}) })
	step("get through v1alpha2", func() error { return c.Get(ctx, client.ObjectKey{Name: "one"}, &v1alpha2.NodeGroup{}) })
	step("update through v1alpha1", func() error {
		ng := &v1alpha1.NodeGroup{}
		if err := c.Get(ctx, client.ObjectKey{Name: "one"}, ng); err != nil {
			return err
		}
		ng.Labels = map[string]string{"touched": "yes"}
		return c.Update(ctx, ng)
	})
	step("create through v1", func() error {
		return c.Create(ctx, &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "two"}, Spec: ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic}})
	})
	step("list through v1alpha1 (warm cache)", func() error { return c.List(ctx, &v1alpha1.NodeGroupList{}) })

	const groups = 1000
	step("create 1,000 through v1", func() error {
		for i := range groups {
			if err := c.Create(ctx, &ngv1.NodeGroup{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("stored-%04d", i)},
				Spec: ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeCloudEphemeral,
					CloudInstances: &ngv1.CloudInstancesSpec{MinPerZone: 1, MaxPerZone: 3, ClassReference: clustertest.NodeGroupClassRef()}},
			}); err != nil {
				return err
			}
		}
		return nil
	})
	step("list 1,002 through v1alpha1 (warm cache)", func() error { return c.List(ctx, &v1alpha1.NodeGroupList{}) })
	step("list 1,002 through v1alpha1, resourceVersion 0", func() error {
		return c.List(ctx, &v1alpha1.NodeGroupList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
	})

	// The restart: same etcd, same port; a fresh serving certificate, so
	// the client trusts the new CA. Nothing asks for NodeGroups until the
	// first LIST, which builds the NodeGroup storage and its watch caches.
	apiServer := cp.Env.ControlPlane.GetAPIServer()
	reviews.waitQuiet(time.Second, 10*time.Second)
	// kube-apiserver 1.37 did not finish its graceful shutdown within
	// envtest's minute here, and envtest then kills it: a crash restart,
	// which fills the watch caches just as a clean one does.
	if err := apiServer.Stop(); err != nil {
		b.Logf("stop: %v", err)
	}
	apiServer.StopTimeout = 10 * time.Second
	if err := apiServer.Start(); err != nil {
		b.Fatal(err)
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.CAData = apiServer.SecureServing.CA
	c = newClient(cfg)
	report("restart, before any NodeGroup request", reviews.waitQuiet(3*time.Second, 30*time.Second))
	start := time.Now()
	var listed *v1alpha1.NodeGroupList
	step("restart: first list through v1alpha1", func() error {
		listed = &v1alpha1.NodeGroupList{}
		err := c.List(ctx, listed)
		b.Logf("first list after the restart: %d items in %s (%v)", len(listed.Items), time.Since(start), err)
		return err
	})
	step("restart: second list through v1alpha1", func() error { return c.List(ctx, &v1alpha1.NodeGroupList{}) })
	step("restart: list through v1alpha2", func() error { return c.List(ctx, &v1alpha2.NodeGroupList{}) })
	if len(listed.Items) != groups+2 {
		b.Fatalf("listed %d NodeGroups after the restart, want %d", len(listed.Items), groups+2)
	}
}
