package policytest

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	admissioncel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object"
	"k8s.io/apiserver/pkg/authentication/user"
	celenvironment "k8s.io/apiserver/pkg/cel/environment"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// callFilter is what kube-apiserver weighs after a webhook's rules match a
// request and before it calls the webhook: the namespaceSelector, the
// objectSelector and the matchConditions. They are taken from the
// configurations Gatehouse writes (webhookconfig.Render, so the excluded
// namespaces are there) and weighed by kube-apiserver's own matchers and
// CEL environment, so that a suite's request is called, or not, as in a
// cluster: a claim deleted in kube-system never reaches pvsafe, and a Pod
// without owners never reaches placement.
type callFilter struct {
	accessors  map[string]webhook.WebhookAccessor
	compiler   admissioncel.ConditionCompiler
	namespaces namespace.Matcher
	objects    object.Matcher
}

// newCallFilter renders hooks as an install in own would write them.
func newCallFilter(hooks []module.Webhook, own string, api *apiServer) *callFilter {
	rendered := webhookconfig.Render(hooks, webhookconfig.Target{URL: "https://gatehouse.suite", Namespace: own})
	f := &callFilter{
		accessors:  map[string]webhook.WebhookAccessor{},
		compiler:   admissioncel.NewConditionCompiler(celenvironment.MustBaseEnvSet(celenvironment.DefaultCompatibilityVersion())),
		namespaces: namespace.Matcher{NamespaceLister: suiteNamespaces{api}},
	}
	for i := range rendered.Validating.Webhooks {
		h := &rendered.Validating.Webhooks[i]
		f.accessors[h.Name] = webhook.NewValidatingWebhookAccessor(h.Name, rendered.Validating.Name, h)
	}
	for i := range rendered.Mutating.Webhooks {
		h := &rendered.Mutating.Webhooks[i]
		f.accessors[h.Name] = webhook.NewMutatingWebhookAccessor(h.Name, rendered.Mutating.Name, h)
	}
	return f
}

// skips says why kube-apiserver would not call the webhook named name for
// req (whose rules match it), or "" when it would call it. An error is a
// request kube-apiserver itself would refuse: a namespace that does not
// exist, a match condition that fails under failurePolicy Fail.
func (f *callFilter) skips(ctx context.Context, name string, req *admissionv1.AdmissionRequest) (string, error) {
	a, ok := f.accessors[name]
	if !ok {
		return "", nil // not rendered: no rules
	}
	attr, err := attributes(req)
	if err != nil {
		return "", err
	}
	if matched, statusErr := f.namespaces.MatchNamespaceSelector(a, attr); statusErr != nil {
		return "", statusErr
	} else if !matched {
		return fmt.Sprintf("its namespaceSelector does not select namespace %q", attr.GetNamespace()), nil
	}
	if matched, statusErr := f.objects.MatchObjectSelector(a, attr); statusErr != nil {
		return "", statusErr
	} else if !matched {
		return "its objectSelector selects neither the object's labels nor the old object's", nil
	}
	if len(a.GetMatchConditions()) == 0 {
		return "", nil
	}
	versioned, err := admission.NewVersionedAttributes(attr, attr.GetKind(), nil)
	if err != nil {
		return "", err
	}
	result := a.GetCompiledMatcher(f.compiler).Match(ctx, versioned, nil, nil)
	if result.Error != nil {
		return "", fmt.Errorf("match conditions of %s: %w", name, result.Error)
	}
	if !result.Matches {
		return fmt.Sprintf("its match condition %q is false", result.FailedConditionName), nil
	}
	return "", nil
}

// attributes is req as kube-apiserver's admission chain holds it. Objects
// are unstructured: kube-apiserver's matchers read labels and CEL reads
// fields, neither needs the typed object.
func attributes(req *admissionv1.AdmissionRequest) (admission.Attributes, error) {
	decode := func(raw runtime.RawExtension) (runtime.Object, error) {
		if len(raw.Raw) == 0 {
			return nil, nil
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(raw.Raw, &u.Object); err != nil {
			return nil, err
		}
		return u, nil
	}
	obj, err := decode(req.Object)
	if err != nil {
		return nil, fmt.Errorf("request.object: %w", err)
	}
	old, err := decode(req.OldObject)
	if err != nil {
		return nil, fmt.Errorf("request.oldObject: %w", err)
	}
	extra := map[string][]string{}
	for k, v := range req.UserInfo.Extra {
		extra[k] = v
	}
	userInfo := &user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups, Extra: extra}
	dryRun := req.DryRun != nil && *req.DryRun
	return admission.NewAttributesRecord(obj, old, schema.GroupVersionKind(req.Kind), req.Namespace, req.Name,
		schema.GroupVersionResource(req.Resource), req.SubResource, admission.Operation(req.Operation), nil, dryRun, userInfo), nil
}

// suiteNamespaces lists the suite's Namespaces to kube-apiserver's
// namespaceSelector matcher. A namespace the suite's state does not hold
// exists with the one label kube-apiserver puts on every namespace: a
// suite need not declare the namespaces its objects live in.
type suiteNamespaces struct{ api *apiServer }

var _ corelisters.NamespaceLister = suiteNamespaces{}

func (s suiteNamespaces) List(selector labels.Selector) ([]*corev1.Namespace, error) {
	var out []*corev1.Namespace
	for _, u := range s.api.objects[corev1.SchemeGroupVersion.WithResource("namespaces")] {
		ns := namespaceOf(u.GetName(), u.GetLabels())
		if selector.Matches(labels.Set(ns.Labels)) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// Get never answers NotFound: the matcher would then ask a client, which a
// suite has none of.
func (s suiteNamespaces) Get(name string) (*corev1.Namespace, error) {
	for _, u := range s.api.objects[corev1.SchemeGroupVersion.WithResource("namespaces")] {
		if u.GetName() == name {
			return namespaceOf(name, u.GetLabels()), nil
		}
	}
	return namespaceOf(name, nil), nil
}

func namespaceOf(name string, have map[string]string) *corev1.Namespace {
	l := make(map[string]string, len(have)+1)
	for k, v := range have {
		l[k] = v
	}
	l[corev1.LabelMetadataName] = name
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}
