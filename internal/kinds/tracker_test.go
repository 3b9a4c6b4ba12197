package kinds_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/kinds"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testlog"
)

func widgetCRD(group string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTrue(),
				}},
			}},
		},
	}
}

func ptrTrue() *bool { t := true; return &t }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	start := time.Now()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s after %s", what, time.Since(start))
}

func TestOptionalKindFollowsItsCRDAndIsSharedCounted(t *testing.T) {
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{CRDPaths: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	group := "k" + rand.String(5) + ".example.com"
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}
	widget := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u
	}

	mapper, newCache := cachesOf(t, cp)
	crds := newCache(cache.Options{DefaultTransform: kinds.StripSchemas})
	var built builtCaches
	tracker, err := kinds.New(ctx, crds, kinds.Options{Scheme: cp.Scheme, Mapper: mapper, MayListWatch: kinds.SelfAccess(cp.Client),
		NewCache: built.maker(newCache)})
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan struct{}, 10)
	first, err := tracker.Follow(widget(), module.Scope{}, func() { changes <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	second, err := tracker.Follow(widget(), module.Scope{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	widgets := built.only(t)
	go func() { _ = crds.Start(ctx) }()
	// The tracker logs through the logger its runnable is started with,
	// as the manager's runnables and controller-runtime's reconcilers do.
	var logs testlog.Lines
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = tracker.Start(logf.IntoContext(ctx, logs.Logger(t).WithName("kinds")))
	}()
	// The tracker logs through t: it must stop before the test returns
	// (a log after it panics the test binary on a slow machine).
	defer func() { cancel(); <-stopped }()

	waitFor(t, "the absent kind is decided", tracker.Ready)
	if first.Readable() {
		t.Fatal("a kind without a CRD is readable")
	}
	if state := first.Wait(ctx); state != module.KindNotServed {
		t.Fatalf("a kind without a CRD: state %s", state)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind("WidgetList"))
	assertUnreadable(ctx, t, "a kind without a CRD", first, gvk)
	var notCached *cache.ErrResourceNotCached
	if err := widgets.List(ctx, list); !errors.As(err, &notCached) {
		t.Fatalf("reading an unfollowed kind: %v, want ErrResourceNotCached (no informer started by accident)", err)
	}

	crd := widgetCRD(group)
	if err := cp.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	// Wait is event-driven: it returns once the CRD is served and the
	// informer synced, with no polling by the caller.
	waitCtx, cancelWait := context.WithTimeout(ctx, time.Minute)
	waitFor(t, "the CRD is established", func() bool { return tracker.Served(gvk) })
	state := first.Wait(waitCtx)
	cancelWait()
	if state != module.KindServed || !first.Readable() || first.Informer() == nil {
		t.Fatalf("after Wait with its CRD served: state %s, readable %v", state, first.Readable())
	}
	<-changes
	if !logs.Has(`kinds/Tracker`, `"msg"="optional kind served; following it"`, `"kind"="`+gvk.String()+`"`) {
		t.Error("the tracker did not log through the logger in its context, named, with the kind")
	}
	obj := widget()
	obj.SetNamespace("default")
	obj.SetName("w1")
	if err := cp.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the informer sees the object", func() bool {
		return widgets.Get(ctx, client.ObjectKeyFromObject(obj), widget()) == nil
	})
	if err := first.Get(ctx, client.ObjectKeyFromObject(obj), widget()); err != nil {
		t.Fatalf("reading a served kind through its reader: %v", err)
	}
	if err := first.List(ctx, list); err != nil || len(list.Items) != 1 {
		t.Fatalf("listing a served kind through its reader: %v, %d items", err, len(list.Items))
	}
	if err := first.Get(ctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{}); err == nil {
		t.Fatal("the reader of one kind read another")
	}

	// One follower leaving keeps the shared informer.
	second.Release()
	if !first.Readable() {
		t.Fatal("releasing one of two followers stopped the kind")
	}

	if err := cp.Client.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the kind stops being readable once its CRD is gone", func() bool { return !first.Readable() })
	<-changes
	waitFor(t, "the informer is removed, not left failing", func() bool {
		err := widgets.List(ctx, list)
		return errors.As(err, &notCached)
	})
	assertUnreadable(ctx, t, "a kind whose CRD was removed", first, gvk)
	waitFor(t, "the CRD is gone", func() bool {
		return apierrors.IsNotFound(cp.Client.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{}))
	})

	// Installed again, it is followed again without a restart.
	crd = widgetCRD(group)
	if err := cp.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the kind is readable again", first.Readable)
	first.Release()
	waitFor(t, "the last follower's release removes the informer", func() bool {
		return errors.As(widgets.List(ctx, list), &notCached)
	})
	<-widgets.stopped
}

// assertUnreadable checks that k reads as a kind without objects.
func assertUnreadable(ctx context.Context, t *testing.T, what string, k *kinds.Handle, gvk schema.GroupVersionKind) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := k.Get(ctx, client.ObjectKey{Namespace: "default", Name: "w1"}, u); !apierrors.IsNotFound(err) {
		t.Fatalf("%s: Get answered %v, want NotFound", what, err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	list.Items = []unstructured.Unstructured{{}}
	if err := k.List(ctx, list); err != nil || len(list.Items) != 0 {
		t.Fatalf("%s: List answered %v with %d items, want an empty list", what, err, len(list.Items))
	}
}

// A served kind Gatehouse may not list and watch is decided as forbidden
// at once and read as empty, without an informer that would never sync.
func TestForbiddenKindReadsAsEmpty(t *testing.T) {
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{CRDPaths: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	group := "f" + rand.String(5) + ".example.com"
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}
	if err := cp.Client.Create(ctx, widgetCRD(group)); err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace("default")
	obj.SetName("w1")
	waitFor(t, "the CRD serves its kind", func() bool { return cp.Client.Create(ctx, obj.DeepCopy()) == nil })

	mapper, newCache := cachesOf(t, cp)
	// The access is asked as an identity with no rights but those of
	// every authenticated user.
	nobody := rest.CopyConfig(cp.Config)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "kinds-test-nobody", Groups: []string{"system:authenticated"}}
	asNobody, err := client.New(nobody, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	crds := newCache(cache.Options{DefaultTransform: kinds.StripSchemas})
	var built builtCaches
	tracker, err := kinds.New(ctx, crds, kinds.Options{Scheme: cp.Scheme, Mapper: mapper, MayListWatch: kinds.SelfAccess(asNobody),
		NewCache: built.maker(newCache)})
	if err != nil {
		t.Fatal(err)
	}
	k, err := tracker.Follow(obj.DeepCopy(), module.Scope{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	widgets := built.only(t)
	defer startTracker(ctx, t, cancel, crds, tracker)()

	waitCtx, cancelWait := context.WithTimeout(ctx, time.Minute)
	defer cancelWait()
	if state := k.Wait(waitCtx); state != module.KindForbidden {
		t.Fatalf("a served kind Gatehouse may not list: state %s", state)
	}
	waitFor(t, "readiness passes with a forbidden kind", tracker.Ready)
	assertUnreadable(ctx, t, "a forbidden kind", k, gvk)
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind("WidgetList"))
	var notCached *cache.ErrResourceNotCached
	if err := widgets.List(ctx, list); !errors.As(err, &notCached) {
		t.Fatalf("a forbidden kind got an informer: %v", err)
	}
}

// cachesOf returns the control plane's RESTMapper and a maker of caches
// over it, configured as the process configures its caches.
func cachesOf(t *testing.T, cp *testenv.ControlPlane) (meta.RESTMapper, func(cache.Options) cache.Cache) {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cp.Config, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	return mapper, func(opts cache.Options) cache.Cache {
		opts.Scheme, opts.Mapper, opts.HTTPClient, opts.ReaderFailOnMissingInformer = cp.Scheme, mapper, httpClient, true
		c, err := cache.New(cp.Config, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// startTracker starts the CRD cache and the tracker, logging through t,
// and returns what stops them: the tracker is waited for, since it logs
// through t, which must not outlive the test.
func startTracker(ctx context.Context, t *testing.T, cancel context.CancelFunc, crds cache.Cache, tracker *kinds.Tracker) func() {
	go func() { _ = crds.Start(ctx) }()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = tracker.Start(logf.IntoContext(ctx, testr.New(t)))
	}()
	return func() { cancel(); <-stopped }
}
