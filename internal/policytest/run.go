package policytest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	webhookrules "k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// Options are what a run needs from the binary.
type Options struct {
	// Modules returns a fresh instance of every module Gatehouse ships
	// (catalogue.All), configured as the command's flags say.
	Modules func() []module.Module
	// Checks are the modules' offline checks (module.OfflineChecker) by
	// the kind of document they check: a suite's configChecks and a file
	// of that kind run them.
	Checks map[string]module.OfflineCheck
	// Log receives the server's and the modules' logs (the decisions among
	// them); discarded when unset.
	Log logr.Logger
}

// SuiteResult is one suite's outcome. Err is set when the suite could not
// run (exit status 2); Results then hold what ran before.
type SuiteResult struct {
	Name, File string
	Results    []Result
	Err        error
}

// Result is one test's outcome.
type Result struct {
	Name   string
	Passed bool
	// Failures say, one per line, how the answer differs from the
	// expectation.
	Failures []string
	// Got sums up the answer.
	Got      string
	Duration time.Duration
}

// Run runs one suite.
func Run(ctx context.Context, s *Suite, opts Options) SuiteResult {
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	out := SuiteResult{Name: s.Name, File: s.file}
	for i, c := range s.ConfigChecks {
		results, err := runConfigCheck(ctx, s, c, opts)
		out.Results = append(out.Results, results...)
		if err != nil {
			out.Err = fmt.Errorf("line %d: configChecks[%d] %s: %w", s.line("configChecks", i), i, c.File, err)
			return out
		}
	}
	if len(s.Tests) == 0 {
		return out
	}
	r, err := newRun(ctx, s, opts)
	if err != nil {
		out.Err = err
		return out
	}
	defer r.close()
	for i := range s.Tests {
		res, err := r.test(ctx, i)
		if err != nil {
			out.Err = fmt.Errorf("line %d: tests[%d] (%s): %w", s.line("tests", i), i, s.Tests[i].Name, err)
			return out
		}
		out.Results = append(out.Results, res)
	}
	return out
}

// served is one webhook as the suite's server serves it.
type served struct {
	module string
	hook   module.Webhook
}

// run is a suite's modules set up over its state, behind a real server.
type run struct {
	suite  *Suite
	api    *apiServer
	env    *environment
	server *server.Server
	mapper meta.RESTMapper
	hooks  []served
	filter *callFilter
	cancel context.CancelFunc
}

func newRun(ctx context.Context, s *Suite, opts Options) (*run, error) {
	all := opts.Modules()
	byName := map[string]module.Module{}
	for _, m := range all {
		byName[m.Name()] = m
	}
	used, err := s.usedModules(all)
	if err != nil {
		return nil, err
	}
	var mods []module.Module
	for _, m := range all {
		if used[m.Name()] {
			mods = append(mods, m)
		}
	}
	scheme, err := module.NewScheme(mods)
	if err != nil {
		return nil, err
	}
	mapper := newMapper(scheme, module.ClusterScopedKinds(mods), s.objects)
	// The CRDs first: a CRD among the suite's objects replaces the one
	// made for its kind.
	api, err := newAPIServer(mapper, append(customResourceDefinitions(scheme, s.objects, mapper), s.objects...), s.Permissions)
	if err != nil {
		return nil, fmt.Errorf("cluster state: %w", err)
	}
	r := &run{suite: s, api: api, mapper: mapper}
	ctx, r.cancel = context.WithCancel(ctx)
	fail := func(err error) (*run, error) {
		r.close()
		return nil, err
	}
	namespace := s.Namespace
	if namespace == "" {
		namespace = "gatehouse-system"
	}
	if r.env, err = newEnvironment(scheme, mapper, api, namespace, opts.Log); err != nil {
		return fail(err)
	}
	if r.server, err = server.New(server.Options{Certificates: noCertificates{}, Log: opts.Log.WithName("server")}); err != nil {
		return fail(err)
	}
	if err := r.env.setup(ctx, r.server); err != nil {
		return fail(err)
	}
	for _, m := range mods {
		mode := module.Enforcement(s.Modules[m.Name()].Enforcement)
		if mode == "" {
			mode = module.Enforce
		}
		hooks := m.Webhooks()
		h := r.env.host(ctx, m.Name(), mode)
		if err := m.Setup(logf.IntoContext(ctx, opts.Log.WithName(m.Name())), h); err != nil {
			h.Discard()
			return fail(fmt.Errorf("module %s: %w", m.Name(), err))
		}
		if err := h.Commit(); err != nil {
			return fail(fmt.Errorf("module %s: %w", m.Name(), err))
		}
		if err := module.ValidateWebhooks(hooks); err != nil {
			return fail(fmt.Errorf("module %s: %w", m.Name(), err))
		}
		for _, hook := range hooks {
			if hook.Type == module.Conversion {
				r.server.Conversion(m.Name(), hook)
			} else {
				r.server.Admission(m.Name(), hook, mode)
			}
			r.hooks = append(r.hooks, served{module: m.Name(), hook: hook})
		}
	}
	declared := make([]module.Webhook, len(r.hooks))
	for i, h := range r.hooks {
		declared[i] = h.hook
	}
	r.filter = newCallFilter(declared, namespace, api)
	if err := r.env.start(ctx); err != nil {
		return fail(err)
	}
	return r, nil
}

func (r *run) close() {
	r.cancel()
	r.api.Close()
}

// usedModules are the modules the suite names, else those its tests name,
// else every module with webhooks. An unknown name is an error.
func (s *Suite) usedModules(all []module.Module) (map[string]bool, error) {
	known := map[string]bool{}
	hookModule := map[string]string{}
	var names []string
	for _, m := range all {
		known[m.Name()] = true
		names = append(names, m.Name())
		for _, h := range m.Webhooks() {
			hookModule[h.Name] = m.Name()
		}
	}
	used := map[string]bool{}
	for name := range s.Modules {
		if !known[name] {
			return nil, fmt.Errorf("line %d: modules: no module %q; Gatehouse has %s", s.line("modules", name), name, strings.Join(names, ", "))
		}
		used[name] = true
	}
	explicit := len(used) > 0
	inferred := false
	for i, t := range s.Tests {
		if t.Module != "" && !known[t.Module] {
			return nil, fmt.Errorf("line %d: tests[%d] (%s): no module %q; Gatehouse has %s", s.line("tests", i, "module"), i, t.Name, t.Module, strings.Join(names, ", "))
		}
		if t.Webhook != "" && hookModule[t.Webhook] == "" {
			hooks := make([]string, 0, len(hookModule))
			for h := range hookModule {
				hooks = append(hooks, h)
			}
			sort.Strings(hooks)
			return nil, fmt.Errorf("line %d: tests[%d] (%s): no webhook %q; Gatehouse declares %s", s.line("tests", i, "webhook"), i, t.Name, t.Webhook, strings.Join(hooks, ", "))
		}
		m := t.Module
		if m == "" {
			m = hookModule[t.Webhook]
		}
		if explicit && m != "" && !used[m] {
			return nil, fmt.Errorf("line %d: tests[%d] (%s): module %s is not among the suite's modules", s.line("tests", i), i, t.Name, m)
		}
		if m == "" {
			inferred = true
		} else if !explicit {
			used[m] = true
		}
	}
	if inferred && !explicit {
		// The modules whose webhooks kube-apiserver would call for a test
		// naming neither module nor webhook: building every module would
		// make a pvsafe suite need configcheck's haproxy.
		scheme, err := module.NewScheme(all)
		if err != nil {
			return nil, err
		}
		mapper := newMapper(scheme, module.ClusterScopedKinds(all), s.objects)
		for _, t := range s.Tests {
			if t.Module != "" || t.Webhook != "" {
				continue
			}
			for _, m := range all {
				for _, h := range m.Webhooks() {
					if mayCall(mapper, h, t) {
						used[m.Name()] = true
					}
				}
			}
		}
	}
	return used, nil
}

// mayCall says whether hook may be sent test's request or conversion: its
// rules name the resource in some version, or it converts the objects'
// CRD. It errs toward yes (any operation and version): what it includes
// is only built, and run answers on exact matches.
func mayCall(mapper meta.RESTMapper, hook module.Webhook, t Test) bool {
	var objs []map[string]any
	apiVersion, kind := "", ""
	if t.Conversion != nil {
		objs = t.Conversion.Objects
	} else if r := t.Request; r != nil {
		apiVersion, kind = r.APIVersion, r.Kind
		objs = []map[string]any{r.Object, r.OldObject}
	}
	for _, o := range objs {
		if o != nil {
			u := unstructured.Unstructured{Object: o}
			apiVersion, kind = or(apiVersion, u.GetAPIVersion()), or(kind, u.GetKind())
		}
	}
	gv, err := schema.ParseGroupVersion(or(apiVersion, "v1"))
	if err != nil {
		return false
	}
	mapping, err := mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
	if err != nil {
		return false
	}
	if t.Conversion != nil {
		return hook.Type == module.Conversion && slices.Contains(hook.CRDs, mapping.Resource.GroupResource().String())
	}
	for _, rule := range hook.Rules {
		for _, res := range rule.Resources {
			main, _, _ := strings.Cut(res, "/")
			if matches(rule.APIGroups, gv.Group) && (main == "*" || main == mapping.Resource.Resource) {
				return true
			}
		}
	}
	return false
}

// answer is what the server answered, across the webhooks called.
type answer struct {
	allowed   bool
	code      int32
	message   string
	warnings  []string
	patched   map[string]any
	converted []map[string]any
	// webhook names the webhook that denied, or the last one called.
	webhook string
	// skipped are the webhooks whose rules match but that kube-apiserver
	// would not call, each with why (callFilter); noneCalled says that
	// none was called, so the request is admitted without Gatehouse.
	skipped    []string
	noneCalled bool
}

func (a answer) String() string {
	verdict := "allowed"
	if !a.allowed {
		verdict = fmt.Sprintf("denied (code %d) by %s", a.code, a.webhook)
	}
	if a.noneCalled {
		verdict += " without calling Gatehouse"
	}
	var b strings.Builder
	b.WriteString(verdict)
	if a.message != "" {
		fmt.Fprintf(&b, ": %s", oneLine(a.message))
	}
	if len(a.warnings) > 0 {
		fmt.Fprintf(&b, "; warnings: %q", a.warnings)
	}
	if len(a.skipped) > 0 {
		fmt.Fprintf(&b, "; not called: %s", strings.Join(a.skipped, "; "))
	}
	return b.String()
}

func (r *run) test(ctx context.Context, i int) (Result, error) {
	t := r.suite.Tests[i]
	start := time.Now()
	var (
		got answer
		err error
	)
	if t.Request != nil {
		got, err = r.admit(ctx, i, t)
	} else {
		got, err = r.convert(ctx, i, t)
	}
	if err != nil {
		return Result{}, err
	}
	res := Result{Name: t.Name, Got: got.String(), Duration: time.Since(start)}
	res.Failures = t.Expect.compare(got)
	res.Passed = len(res.Failures) == 0
	return res, nil
}

// admit sends the request to every webhook it would reach: the mutating
// ones first, in declaration order, each seeing the object as the previous
// one patched it, then the validating ones, as kube-apiserver calls them.
func (r *run) admit(ctx context.Context, i int, t Test) (answer, error) {
	req, object, err := r.admissionRequest(i, t.Request)
	if err != nil {
		return answer{}, err
	}
	var (
		hooks    []served
		requests []*admissionv1.AdmissionRequest
	)
	for _, phase := range []module.Type{module.Mutating, module.Validating} {
		for _, h := range r.hooks {
			if h.hook.Type != phase || (t.Module != "" && h.module != t.Module) || (t.Webhook != "" && h.hook.Name != t.Webhook) {
				continue
			}
			hookReq, err := r.requestFor(ctx, h.hook, req)
			if err != nil {
				return answer{}, fmt.Errorf("webhook %s: %w", h.hook.Name, err)
			}
			if hookReq != nil {
				hooks = append(hooks, h)
				requests = append(requests, hookReq)
			}
		}
	}
	if len(hooks) == 0 {
		what := t.Webhook
		if what == "" {
			what = "the suite's modules"
		}
		if t.Expect.Called != nil && !*t.Expect.Called {
			// What the test asks: nothing of Gatehouse's is called.
			return answer{allowed: true, noneCalled: true, skipped: []string{"the rules of no webhook of " + what + " match"}}, nil
		}
		return answer{}, fmt.Errorf("no webhook of %s matches %s %s (%s): kube-apiserver would not call Gatehouse", what, req.Operation, req.Resource.Resource, module.GVKString(schema.GroupVersionKind(req.Kind)))
	}
	got := answer{allowed: true, patched: object}
	called := false
	for n, h := range hooks {
		review := admissionv1.AdmissionReview{Request: requests[n].DeepCopy()}
		review.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"))
		review.Request.UID = types.UID(fmt.Sprintf("suite-test-%d-%d", i, n))
		// Each webhook sees the object as the mutating ones before it left
		// it (a request converted for an equivalent version carries its
		// own conversion of the object as sent).
		if requests[n] == req && got.patched != nil && len(review.Request.Object.Raw) > 0 {
			object := got.patched
			if h.hook.Type == module.Validating {
				object = storedFields(req, object)
			}
			raw, err := json.Marshal(object)
			if err != nil {
				return answer{}, err
			}
			review.Request.Object.Raw = raw
		}
		// Weighed on the object as the mutating webhooks before left it,
		// as kube-apiserver does.
		why, err := r.filter.skips(ctx, h.hook.Name, review.Request)
		if err != nil {
			return answer{}, fmt.Errorf("webhook %s: %w", h.hook.Name, err)
		}
		if why != "" {
			got.skipped = append(got.skipped, h.hook.Name+": "+why)
			continue
		}
		called = true
		code, body := r.post(ctx, h.hook.Path, &review)
		one, err := readAdmission(code, body)
		if err != nil {
			return answer{}, fmt.Errorf("webhook %s: %w", h.hook.Name, err)
		}
		got.warnings = append(got.warnings, one.warnings...)
		got.webhook = h.hook.Name
		if !one.allowed {
			got.allowed, got.code, got.message = false, one.code, one.message
			return got, nil
		}
		if len(one.patch) > 0 && got.patched != nil {
			if got.patched, err = applyPatch(got.patched, one.patch); err != nil {
				return answer{}, fmt.Errorf("webhook %s: its patch does not apply: %w", h.hook.Name, err)
			}
		}
	}
	got.noneCalled = !called
	return got, nil
}

// post sends a review to the server's handler, as kube-apiserver does but
// without TLS: the guard, decoding, enforcement and encoding are the
// server's. The suite plays kube-apiserver, so the request is marked as
// from a caller the server authenticated (module.VerifiedCaller), as a
// cluster with client certificates marks the API server's: the modules
// then answer as they answer it (configcheck's author check included).
func (r *run) post(ctx context.Context, path string, review any) (int, []byte) {
	body, _ := json.Marshal(review)
	req := httptest.NewRequestWithContext(module.WithVerifiedCaller(ctx), http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	r.server.WebhookMux().ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

type admissionAnswer struct {
	allowed  bool
	code     int32
	message  string
	warnings []string
	patch    []byte
}

// readAdmission reads the server's answer: an AdmissionReview (200, or
// 500 after a panic), or a Status (503: undecided; what the API server
// would show under the webhook's failurePolicy).
func readAdmission(code int, body []byte) (admissionAnswer, error) {
	switch code {
	case http.StatusOK, http.StatusInternalServerError:
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Response == nil {
			return admissionAnswer{}, fmt.Errorf("the server answered %d without a review: %s", code, bytes.TrimSpace(body))
		}
		resp := review.Response
		a := admissionAnswer{allowed: resp.Allowed, warnings: resp.Warnings, patch: resp.Patch}
		if resp.Result != nil {
			a.code, a.message = resp.Result.Code, resp.Result.Message
		}
		if !a.allowed && a.code == 0 {
			a.code = http.StatusForbidden
		}
		return a, nil
	case http.StatusServiceUnavailable:
		var status metav1.Status
		if err := json.Unmarshal(body, &status); err != nil {
			return admissionAnswer{}, fmt.Errorf("the server answered 503: %s", bytes.TrimSpace(body))
		}
		return admissionAnswer{code: http.StatusServiceUnavailable, message: status.Message}, nil
	}
	// The server refused the review itself (400, 413): the suite built a
	// review it cannot read.
	return admissionAnswer{}, fmt.Errorf("the server refused the review with %d: %s", code, bytes.TrimSpace(body))
}

func applyPatch(object map[string]any, patch []byte) (map[string]any, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(object)
	if err != nil {
		return nil, err
	}
	if raw, err = p.Apply(raw); err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(raw, &out)
}

// admissionRequest builds the request kube-apiserver would send, and the
// object a mutation patches.
func (r *run) admissionRequest(i int, in *Request) (*admissionv1.AdmissionRequest, map[string]any, error) {
	var object, old *unstructured.Unstructured
	var err error
	if in.Object != nil {
		if object, err = toObject(in.Object); err != nil {
			return nil, nil, fmt.Errorf("request.object: %w", err)
		}
	}
	if in.OldObject != nil {
		if old, err = toObject(in.OldObject); err != nil {
			return nil, nil, fmt.Errorf("request.oldObject: %w", err)
		}
	}
	named := object
	if named == nil {
		named = old
	}
	apiVersion, kind, name, namespace := in.APIVersion, in.Kind, in.Name, in.Namespace
	if named != nil {
		apiVersion, kind = or(apiVersion, named.GetAPIVersion()), or(kind, named.GetKind())
		name, namespace = or(name, named.GetName()), or(namespace, named.GetNamespace())
	}
	if apiVersion == "" {
		apiVersion = "v1"
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, nil, fmt.Errorf("request apiVersion: %w", err)
	}
	gvk := gv.WithKind(kind)
	mapping, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, nil, fmt.Errorf("request kind %s: %w", module.GVKString(gvk), err)
	}
	switch {
	case mapping.Scope.Name() == meta.RESTScopeNameNamespace:
		namespace = or(namespace, metav1.NamespaceDefault)
	case mapping.Resource.GroupResource() == corev1.Resource("namespaces"):
		// kube-apiserver takes a Namespace's name as the request's
		// namespace (its path is /api/v1/namespaces/<name>).
		namespace = name
	default:
		namespace = ""
	}
	if old == nil && (in.Operation == "UPDATE" || in.Operation == "DELETE") {
		// kube-apiserver sends the stored object.
		stored := namespace
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			stored = ""
		}
		for _, o := range r.api.objects[mapping.Resource] {
			if o.GetName() == name && o.GetNamespace() == stored {
				old = o.DeepCopy()
			}
		}
		if old == nil {
			return nil, nil, fmt.Errorf("%s of %s %s: the cluster state holds no such object to send as oldObject; give request.oldObject", in.Operation, kind, join(stored, name))
		}
	}
	if object != nil && mapping.Scope.Name() == meta.RESTScopeNameNamespace && object.GetNamespace() == "" {
		object.SetNamespace(namespace)
	}
	for _, o := range []*unstructured.Unstructured{object, old} {
		if o != nil {
			mergeStringData(o)
		}
	}
	user := authenticationv1.UserInfo{Username: or(in.UserInfo.Username, "suite-user"), UID: in.UserInfo.UID, Groups: in.UserInfo.Groups}
	if !slices.Contains(user.Groups, "system:authenticated") {
		user.Groups = append(slices.Clone(user.Groups), "system:authenticated")
	}
	for k, v := range in.UserInfo.Extra {
		if user.Extra == nil {
			user.Extra = map[string]authenticationv1.ExtraValue{}
		}
		user.Extra[k] = v
	}
	dryRun := in.DryRun
	req := &admissionv1.AdmissionRequest{
		Kind:        metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:    metav1.GroupVersionResource{Group: mapping.Resource.Group, Version: mapping.Resource.Version, Resource: mapping.Resource.Resource},
		SubResource: in.SubResource,
		Name:        name, Namespace: namespace,
		Operation: admissionv1.Operation(in.Operation),
		UserInfo:  user,
		DryRun:    &dryRun,
	}
	req.RequestKind, req.RequestResource, req.RequestSubResource = &req.Kind, &req.Resource, req.SubResource
	var patched map[string]any
	if object != nil {
		if req.Object.Raw, err = json.Marshal(object.Object); err != nil {
			return nil, nil, err
		}
		patched = object.Object
	}
	if old != nil {
		if req.OldObject.Raw, err = json.Marshal(old.Object); err != nil {
			return nil, nil, err
		}
	}
	options := map[admissionv1.Operation]string{admissionv1.Create: "CreateOptions", admissionv1.Update: "UpdateOptions", admissionv1.Delete: "DeleteOptions"}
	if kind := options[req.Operation]; kind != "" {
		req.Options.Raw = []byte(`{"apiVersion":"meta.k8s.io/v1","kind":"` + kind + `"}`)
	}
	return req, patched, nil
}

// requestFor is req as kube-apiserver sends it to hook: as it is when the
// rules match it; converted to a version the rules name, with requestKind
// and requestResource left as the client's, when they match only an
// equivalent version (matchPolicy Equivalent, the default) and a suite
// module converts the kind; nil when hook is not called. A mutating
// webhook is called on the request's own version only: a suite checks
// patches of the version it sends.
func (r *run) requestFor(ctx context.Context, hook module.Webhook, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionRequest, error) {
	if ruleMatches(hook.Rules, req) {
		return req, nil
	}
	if hook.MatchPolicy == admissionregistrationv1.Exact || hook.Type != module.Validating {
		return nil, nil
	}
	for _, rule := range hook.Rules {
		for _, version := range rule.APIVersions {
			if version == "*" || version == req.Resource.Version || !matches(rule.APIGroups, req.Resource.Group) {
				continue
			}
			other := req.DeepCopy()
			other.Kind.Version, other.Resource.Version = version, version
			if !ruleMatches([]admissionregistrationv1.RuleWithOperations{rule}, other) {
				continue
			}
			desired := schema.GroupVersion{Group: req.Kind.Group, Version: version}.String()
			for _, raw := range []*runtime.RawExtension{&other.Object, &other.OldObject} {
				if len(raw.Raw) == 0 {
					continue
				}
				converted, err := r.convertRaw(ctx, desired, raw.Raw)
				if err != nil {
					return nil, fmt.Errorf("convert the request's object to %s as kube-apiserver would: %w", desired, err)
				}
				raw.Raw = converted
			}
			return other, nil
		}
	}
	return nil, nil
}

// convertRaw converts one object through the conversion webhook serving its
// CRD; an object no suite module converts is an error.
func (r *run) convertRaw(ctx context.Context, desired string, raw []byte) ([]byte, error) {
	got, err := r.convert(ctx, -1, Test{Conversion: &Conversion{DesiredAPIVersion: desired, Objects: []map[string]any{nil}}}, raw)
	if err != nil {
		return nil, err
	}
	if !got.allowed || len(got.converted) != 1 {
		return nil, fmt.Errorf("the conversion failed: %s", got.message)
	}
	return json.Marshal(got.converted[0])
}

// ruleMatches says whether kube-apiserver would send req to a webhook with
// these rules (operations, group, version, resource and subresource,
// scope: a Namespace, whose requests carry its name as their namespace, is
// cluster-scoped), by kube-apiserver's own rule matcher. Its selectors and
// matchConditions are weighed next (callFilter).
func ruleMatches(rules []admissionregistrationv1.RuleWithOperations, req *admissionv1.AdmissionRequest) bool {
	attr := admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind(req.Kind), req.Namespace, req.Name,
		schema.GroupVersionResource(req.Resource), req.SubResource, admission.Operation(req.Operation), nil, false, nil)
	for _, rule := range rules {
		m := webhookrules.Matcher{Rule: rule, Attr: attr}
		if m.Matches() {
			return true
		}
	}
	return false
}

// convert sends a ConversionReview to the conversion webhook serving the
// objects' CRD.
func (r *run) convert(ctx context.Context, i int, t Test, raws ...[]byte) (answer, error) {
	c := t.Conversion
	review := apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{
		UID: types.UID(fmt.Sprintf("suite-test-%d", i)), DesiredAPIVersion: c.DesiredAPIVersion,
	}}
	review.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("ConversionReview"))
	var crd string
	for n, o := range c.Objects {
		if n < len(raws) {
			o = map[string]any{}
			if err := json.Unmarshal(raws[n], &o); err != nil {
				return answer{}, err
			}
		}
		u, err := toObject(o)
		if err != nil {
			return answer{}, fmt.Errorf("conversion.objects[%d]: %w", n, err)
		}
		gvk := u.GroupVersionKind()
		mapping, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return answer{}, fmt.Errorf("conversion.objects[%d]: %w", n, err)
		}
		crd = mapping.Resource.GroupResource().String()
		raw, err := json.Marshal(u.Object)
		if err != nil {
			return answer{}, err
		}
		review.Request.Objects = append(review.Request.Objects, runtime.RawExtension{Raw: raw})
	}
	var hook *served
	for n, h := range r.hooks {
		if h.hook.Type == module.Conversion && slices.Contains(h.hook.CRDs, crd) &&
			(t.Module == "" || h.module == t.Module) && (t.Webhook == "" || h.hook.Name == t.Webhook) {
			hook = &r.hooks[n]
		}
	}
	if hook == nil {
		return answer{}, fmt.Errorf("no conversion webhook of the suite's modules converts %s", crd)
	}
	code, body := r.post(ctx, hook.hook.Path, &review)
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &out); err != nil || out.Response == nil {
		return answer{}, fmt.Errorf("webhook %s answered %d without a review: %s", hook.hook.Name, code, bytes.TrimSpace(body))
	}
	got := answer{webhook: hook.hook.Name, allowed: out.Response.Result.Status == metav1.StatusSuccess,
		code: out.Response.Result.Code, message: out.Response.Result.Message}
	if code != http.StatusOK && got.code == 0 {
		got.code = int32(code)
	}
	for _, raw := range out.Response.ConvertedObjects {
		var obj map[string]any
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			return answer{}, fmt.Errorf("webhook %s: a converted object is not JSON: %w", hook.hook.Name, err)
		}
		got.converted = append(got.converted, obj)
	}
	return got, nil
}

// runConfigCheck runs one document's offline check (its embedded tests);
// each test is a result.
func runConfigCheck(ctx context.Context, s *Suite, c ConfigCheck, opts Options) ([]Result, error) {
	data, err := readRelative(s.dir, c.File)
	if err != nil {
		return nil, err
	}
	check, ok := opts.Checks[KindOf(data)]
	if !ok {
		return nil, fmt.Errorf("no module of this binary checks a document of kind %q offline", KindOf(data))
	}
	results, err := check.Run(ctx, data, module.OfflineRequest{Test: c.Test, Asks: c.Asks})
	if err != nil {
		return nil, err
	}
	return offlineResults(c.File, results), nil
}

// RunFile runs what file holds (data): a document a module checks
// offline, whose embedded tests make a suite of their own, or else a
// TestSuite (whose loading reports what else the file is).
func RunFile(ctx context.Context, file string, data []byte, opts Options) SuiteResult {
	if check, ok := opts.Checks[KindOf(data)]; ok {
		out := SuiteResult{Name: file, File: file}
		results, err := check.Run(ctx, data, module.OfflineRequest{})
		if err != nil {
			out.Err = fmt.Errorf("%s: %w", file, err)
		} else {
			out.Results = offlineResults(file, results)
		}
		return out
	}
	s, err := LoadBytes(file, data)
	if err != nil {
		return SuiteResult{Name: file, File: file, Err: err}
	}
	return Run(ctx, s, opts)
}

// offlineResults names an offline check's results "<file>: <test>".
func offlineResults(file string, results []module.OfflineResult) []Result {
	var out []Result
	for _, r := range results {
		res := Result{Name: file + ": " + r.Name, Passed: r.Passed, Duration: r.Duration, Got: "passed", Failures: r.Failures}
		if !r.Passed {
			res.Got = "failed"
		}
		out = append(out, res)
	}
	return out
}

// noCertificates stands for the serving certificate: the suite's server
// never listens.
type noCertificates struct{}

func (noCertificates) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return nil, errors.New("gatehouse test serves no TLS")
}
func (noCertificates) Start(ctx context.Context) error { <-ctx.Done(); return nil }

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func join(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return s
}

// AddFlags registers on fs, the flag set of `gatehouse test`, the flags
// the modules' offline checks declare (module.OfflineCheck.SuiteFlags),
// bound to mods, and returns them with the names of the hidden ones and
// the checks of mods by kind (Options.Checks). The flags given configure
// every suite's fresh modules too: Options.Modules gives them again
// (module.CommandFlags.Replay).
func AddFlags(fs *flag.FlagSet, mods []module.Module) (*module.CommandFlags, []string, map[string]module.OfflineCheck) {
	given, hidden := module.AddCommandFlags(fs, mods, func(m module.Module, own *module.FlagSet) {
		if c, ok := m.(module.OfflineChecker); ok {
			if check := c.OfflineCheck(); check.SuiteFlags != nil {
				check.SuiteFlags(own)
			}
		}
	})
	checks := map[string]module.OfflineCheck{}
	for _, m := range mods {
		if c, ok := m.(module.OfflineChecker); ok {
			check := c.OfflineCheck()
			checks[check.Kind] = check
		}
	}
	return given, hidden, checks
}

// storedFields is object as kube-apiserver stores it, which its validating
// webhooks see: on a CREATE with the uid, creation time and generation 1
// its registry sets after the mutating webhooks; on an UPDATE with the
// stored uid and creation time, and the generation bumped when anything
// but metadata and status changed (customresource's PrepareForUpdate).
// Modules that sign records bound to these (configcheck's author) are
// judged as in a cluster.
func storedFields(req *admissionv1.AdmissionRequest, object map[string]any) map[string]any {
	out := runtime.DeepCopyJSON(object)
	meta, _ := out["metadata"].(map[string]any)
	if meta == nil {
		return out
	}
	switch req.Operation {
	case admissionv1.Create:
		if meta["uid"] == nil {
			meta["uid"] = "suite-uid"
		}
		meta["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
		meta["generation"] = int64(1)
	case admissionv1.Update:
		var old map[string]any
		if json.Unmarshal(req.OldObject.Raw, &old) != nil {
			return out
		}
		oldMeta, _ := old["metadata"].(map[string]any)
		if oldMeta == nil {
			return out
		}
		meta["uid"], meta["creationTimestamp"] = oldMeta["uid"], oldMeta["creationTimestamp"]
		gen, _ := oldMeta["generation"].(float64)
		a, b := runtime.DeepCopyJSON(out), runtime.DeepCopyJSON(old)
		for _, m := range []map[string]any{a, b} {
			delete(m, "metadata")
			delete(m, "status")
		}
		if !equality.Semantic.DeepEqual(a, b) {
			gen++
		}
		meta["generation"] = int64(gen)
	}
	return out
}
