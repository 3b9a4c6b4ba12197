package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cozyv1alpha1 "github.com/gatehouse-dev/gatehouse/api/cozystack.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/placement"
	"github.com/gatehouse-dev/gatehouse/internal/testing/clustertest"
)

// The placement benchmark's cluster: 10,000 Pods, each four ownership hops
// from the object Flux labelled with its release:
//
//	Pod → ReplicaSet → Deployment → Database (an operator's CR) → Application (CR, Flux labels)
//
// 2,500 ReplicaSets and Deployments (four Pods each), 250 Databases and
// Applications. Pods name no scheduler that runs, and their ownerReferences
// are not controller references whose selectors match, so no controller of
// the shared control plane acts on them.
const (
	benchNamespace   = "placement-bench"
	benchPods        = 10_000
	benchPodsPerSet  = 4
	benchSetsPerApp  = 10
	benchBenchGroup  = "bench.gatehouse.dev"
	benchReleaseName = "bench-app"
)

var (
	databaseGVK    = schema.GroupVersionKind{Group: benchBenchGroup, Version: "v1", Kind: "Database"}
	applicationGVK = schema.GroupVersionKind{Group: benchBenchGroup, Version: "v1", Kind: "Application"}
)

// benchLineage is what the fixture made: a reference to each Pod's
// ReplicaSet, in order.
type benchLineage struct {
	sets []metav1.OwnerReference
}

// createPlacementFixture fills the control plane, in parallel, and is
// idempotent so that -count re-runs reuse it.
func createPlacementFixture(b *testing.B) benchLineage {
	ctx := context.Background()
	c := controlPlane.Client
	for _, s := range []func(*kruntime.Scheme) error{cozyv1alpha1.AddToScheme, helmv2.AddToScheme} {
		if err := s(c.Scheme()); err != nil {
			b.Fatal(err)
		}
	}
	mustCreate := func(obj client.Object) client.Object {
		if err := c.Create(ctx, obj); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				b.Fatal(err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				b.Fatal(err)
			}
		}
		return obj
	}
	mustCreate(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}})
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{clustertest.SchemalessCRD(databaseGVK, "databases"), clustertest.SchemalessCRD(applicationGVK, "applications")} {
		mustCreate(crd)
	}
	mustCreate(&cozyv1alpha1.AffinityClass{ObjectMeta: metav1.ObjectMeta{Name: "bench-dc1"},
		Spec: cozyv1alpha1.AffinityClassSpec{NodeSelector: map[string]string{corev1.LabelTopologyZone: "zone-a"}}})
	mustCreate(&helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: benchReleaseName, Labels: map[string]string{
			"apps.cozystack.io/application.kind": "Bench", "apps.cozystack.io/affinity-class": "bench-dc1"}},
		Spec: helmv2.HelmReleaseSpec{Interval: metav1.Duration{Duration: time.Hour},
			Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "bench", SourceRef: helmv2.CrossNamespaceObjectReference{Kind: "HelmRepository", Name: "bench"}}}},
	})
	ref := func(obj client.Object, gvk schema.GroupVersionKind) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: obj.GetName(), UID: obj.GetUID()}
	}
	custom := func(gvk schema.GroupVersionKind, name string, owner *metav1.OwnerReference, labels map[string]string) client.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(benchNamespace)
		u.SetName(name)
		u.SetLabels(labels)
		if owner != nil {
			u.SetOwnerReferences([]metav1.OwnerReference{*owner})
		}
		var obj client.Object = u
		eventually(b, "the fixture's CRDs are served", func() error {
			err := c.Create(ctx, obj)
			if apierrors.IsAlreadyExists(err) {
				return c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			}
			return err
		})
		return obj
	}

	sets := benchPods / benchPodsPerSet
	apps := sets / benchSetsPerApp
	appRefs := make([]metav1.OwnerReference, apps)
	for i := range apps {
		a := custom(applicationGVK, fmt.Sprintf("app-%03d", i), nil, map[string]string{"helm.toolkit.fluxcd.io/name": benchReleaseName})
		db := custom(databaseGVK, fmt.Sprintf("db-%03d", i), ptr.To(ref(a, applicationGVK)), nil)
		appRefs[i] = ref(db, databaseGVK)
	}
	out := benchLineage{sets: make([]metav1.OwnerReference, benchPods)}
	parallel(b, sets, func(i int) {
		labels := map[string]string{"bench-set": fmt.Sprint(i)}
		d := mustCreate(&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("web-%04d", i), OwnerReferences: []metav1.OwnerReference{appRefs[i/benchSetsPerApp]}},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Paused: true, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: benchPodSpec()}},
		})
		// The ReplicaSet carries no labels the Deployment selects, so the
		// Deployment controller does not adopt it.
		rsLabels := map[string]string{"bench-rs": fmt.Sprint(i)}
		rs := mustCreate(&appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("web-%04d-rs", i),
				OwnerReferences: []metav1.OwnerReference{ref(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: rsLabels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: rsLabels}, Spec: benchPodSpec()}},
		})
		setRef := ref(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
		for j := range benchPodsPerSet {
			n := i*benchPodsPerSet + j
			out.sets[n] = setRef
			mustCreate(&corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("web-%04d-%d", i, j), OwnerReferences: []metav1.OwnerReference{setRef}},
				Spec:       benchPodSpec(),
			})
		}
	})
	return out
}

func benchPodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		SchedulerName: "bench-no-scheduler",
		NodeSelector:  map[string]string{corev1.LabelTopologyZone: "zone-a"},
		Containers:    []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
	}
}

// parallel runs f(0..n-1) on 16 workers.
func parallel(b *testing.B, n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// podReview is the AdmissionReview request kube-apiserver sends for a new
// Pod of set: made by the ReplicaSet controller, so only a generateName.
func podReview(b *testing.B, setRef metav1.OwnerReference, i int, selector map[string]string) admission.Request {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, GenerateName: setRef.Name + "-", OwnerReferences: []metav1.OwnerReference{setRef}},
		Spec:       benchPodSpec(),
	}
	pod.Spec.NodeSelector = selector
	raw, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: types.UID(fmt.Sprint("bench-", i)), Operation: admissionv1.Create, Namespace: benchNamespace,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: kruntime.RawExtension{Raw: raw},
	}}
}

// BenchmarkPlacementPodDecision: the Pod webhook's decision (decode the
// Pod, walk four hops, read the release and the class, check) from
// Gatehouse's real caches holding 10,000 Pods and their owners, against
// Cozystack's way in the same run: one live GET per hop.
//
//	go test ./test/bench -run '^$' -bench PlacementPodDecision -benchtime 20000x -count 3
func BenchmarkPlacementPodDecision(b *testing.B) {
	ctx := context.Background()
	fixture := createPlacementFixture(b)

	m := placement.New(placement.Options{})
	g, err := app.New(ctx, app.Options{RestConfig: controlPlane.Config, CertDir: mustCertDir(b), MetricsAddr: "0", Namespace: "gatehouse-e2e", Log: logr.Discard(),
		Catalogue: []module.Module{m}, Modules: map[string]app.ModuleConfig{"placement": {Enabled: true}}})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = g.Start(runCtx) }()
	var admit module.AdmitFunc
	for _, w := range m.Webhooks() {
		if w.Name == placement.PodWebhookName {
			admit = w.Admit
		}
	}
	reviews := make([]admission.Request, 1000)
	for i := range reviews {
		reviews[i] = podReview(b, fixture.sets[i*benchPods/len(reviews)], i, benchPodSpec().NodeSelector)
	}
	// Ready when the whole lineage resolves from synced caches (the first
	// Pod naming a Database or an Application starts that kind's
	// informer): a Pod without the class's selector is then denied.
	probe := podReview(b, fixture.sets[0], -1, nil)
	eventually(b, "placement walks the lineage from synced caches", func() error {
		if resp := admit(ctx, probe); resp.Allowed {
			return fmt.Errorf("the probe Pod was admitted (warnings %v)", resp.Warnings)
		}
		return nil
	})

	b.Run("cached", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			resp := admit(ctx, reviews[i%len(reviews)])
			lat = append(lat, time.Since(start))
			if !resp.Allowed {
				b.Fatalf("denied: %v", resp.Result)
			}
		}
		reportPercentiles(b, lat)
	})

	// Cozystack's lineage webhook: a GET per hop through the API server,
	// here with the metadata client (cheaper than its typed GETs).
	live := g.Manager.GetAPIReader()
	b.Run("live-get-per-hop", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			ref := fixture.sets[(i*benchPods/1000)%benchPods]
			for hops := 0; ; hops++ {
				gv, _ := schema.ParseGroupVersion(ref.APIVersion)
				obj := &metav1.PartialObjectMetadata{}
				obj.SetGroupVersionKind(gv.WithKind(ref.Kind))
				if err := live.Get(ctx, client.ObjectKey{Namespace: benchNamespace, Name: ref.Name}, obj); err != nil {
					b.Fatal(err)
				}
				if len(obj.OwnerReferences) == 0 {
					if hops != 3 {
						b.Fatalf("lineage of %d GETs", hops+1)
					}
					break
				}
				ref = obj.OwnerReferences[0]
			}
			lat = append(lat, time.Since(start))
		}
		reportPercentiles(b, lat)
	})
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}

// BenchmarkPlacementCacheMemory: heap held by a metadata-only informer
// cache per 10,000 objects (the owners), next to a typed cache of the same
// Pods (what a full cache would hold) and placement's slimmed Pod cache.
//
//	go test ./test/bench -run '^$' -bench PlacementCacheMemory -benchtime 1x -count 3
func BenchmarkPlacementCacheMemory(b *testing.B) {
	createPlacementFixture(b)
	ctx := context.Background()
	podMeta := &metav1.PartialObjectMetadata{}
	podMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	for _, tc := range []struct {
		name string
		obj  client.Object
		opts cache.ByObject
	}{
		{"typed-pods", &corev1.Pod{}, cache.ByObject{}},
		{"metadata-pods", podMeta, cache.ByObject{}},
		{"placement-slim-pods", &corev1.Pod{}, cache.ByObject{Transform: placement.KeepPlacementFields}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				before := heapInUse()
				c, err := cache.New(controlPlane.Config, cache.Options{
					Scheme:            controlPlane.Scheme,
					DefaultNamespaces: map[string]cache.Config{benchNamespace: {}},
					ByObject:          map[client.Object]cache.ByObject{tc.obj: tc.opts},
					DefaultTransform:  cache.TransformStripManagedFields(),
				})
				if err != nil {
					b.Fatal(err)
				}
				cctx, cancel := context.WithCancel(ctx)
				go func() { _ = c.Start(cctx) }()
				if _, err := c.GetInformer(cctx, tc.obj); err != nil {
					b.Fatal(err)
				}
				if !c.WaitForCacheSync(cctx) {
					b.Fatal("not synced")
				}
				held := heapInUse() - before
				b.ReportMetric(float64(held)/benchPods*10_000/(1<<20), "MiB/10k-objects")
				runtime.KeepAlive(c)
				cancel()
			}
		})
	}
}

// heapInUse is the live heap: after a collection, HeapAlloc counts
// reachable objects only (HeapInuse would count spans that the listing's
// garbage left partly used).
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func mustCertDir(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	bundle, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	if err := bundle.WriteDir(dir); err != nil {
		b.Fatal(err)
	}
	return dir
}
