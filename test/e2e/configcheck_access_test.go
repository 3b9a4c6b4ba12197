package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// accessTemplate passes haproxy -c and writes the name of every Secret and
// ConfigMap the config reads into the published rendering, as a template
// reading what it should not would.
const accessTemplate = authzTemplate + `# {{ range .resources.secrets.List }}secret {{ .metadata.namespace }}/{{ .metadata.name }} {{ end }}
# {{ range .resources.cms.List }}cm {{ .metadata.namespace }}/{{ .metadata.name }} {{ end }}
`

// TestConfigcheckNamespaceThatJoinsLaterIsLeftOut is issue 26's attack as
// the confined author (edit in its namespace, view in another): a config
// over Secrets in the namespaces named team and future is admitted while
// future does not exist, and one over ConfigMaps in namespaces labelled
// with a label of theirs. Then an administrator creates future with a
// Secret, and labels a namespace of theirs. Before, both landed in the
// author's published ConfigMap; now both are left out, the status names
// future (which the author named) and not the other.
func TestConfigcheckNamespaceThatJoinsLaterIsLeftOut(t *testing.T) {
	e := startConfigcheckAuthz(t)
	ctx := context.Background()
	future := "future-" + randSuffix()
	label := "access-" + randSuffix()
	certs := map[string]string{"cert": "true"}
	setLabel := func(ns string) {
		t.Helper()
		obj := &corev1.Namespace{}
		if err := e.admin.Get(ctx, types.NamespacedName{Name: ns}, obj); err != nil {
			t.Fatal(err)
		}
		obj.Labels[label] = "yes"
		if err := e.admin.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	setLabel(e.team)
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: "mine", Labels: certs}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: "mine-cm", Labels: certs}},
	} {
		if err := e.user.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cfg := e.config("future", map[string]gatehousev1alpha1.WatchedResource{
		"secrets": {APIVersion: "v1", Resources: "secrets", LabelSelector: &metav1.LabelSelector{MatchLabels: certs},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{e.team, future}}}}},
		"cms": {APIVersion: "v1", Resources: "configmaps", LabelSelector: &metav1.LabelSelector{MatchLabels: certs},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}}},
	})
	cfg.Spec.HAProxyConfig.Template = accessTemplate
	// A render worker starting on a loaded machine (its binary is linked
	// on first use) may take longer than the webhook's timeout: a failed
	// call is no answer, so it is retried.
	eventually(t, "the author's config over their own namespace is admitted", func() error {
		err := e.user.Create(ctx, cfg)
		if err != nil && !strings.Contains(err.Error(), "failed calling webhook") {
			t.Fatalf("the author's config over their own namespace: %v", err)
		}
		return err
	})
	published := func() string {
		cm := &corev1.ConfigMap{}
		if err := e.user.Get(ctx, types.NamespacedName{Namespace: e.team, Name: configcheck.RenderedConfigMapName(cfg.Name)}, cm); err != nil {
			return ""
		}
		return cm.Data["haproxy.cfg"]
	}
	waitPublished := func(want string) {
		t.Helper()
		eventually(t, want+" is published", func() error {
			if !strings.Contains(published(), want) {
				return fmt.Errorf("not in the published rendering:\n%s", published())
			}
			return nil
		})
	}
	waitPublished("secret " + e.team + "/mine")
	waitPublished("cm " + e.team + "/mine-cm")

	// The administrator creates future, with a Secret the author may not
	// read, and labels hidden, whose ConfigMaps the author may not read.
	hidden := namespace(t, "hidden")
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: future}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: future, Name: "leak", Labels: certs}, Data: map[string][]byte{"key": []byte("private")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hidden, Name: "leak-cm", Labels: certs}},
	} {
		if err := e.admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = e.admin.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: future}})
	})
	setLabel(hidden)

	// The config's readers are told what was left out: the namespace the
	// author named, not the one selected by label.
	var authorized *metav1.Condition
	eventually(t, "condition Authorized names the namespace left out", func() error {
		got := &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := e.user.Get(ctx, client.ObjectKeyFromObject(cfg), got); err != nil {
			return err
		}
		authorized = meta.FindStatusCondition(got.Status.Conditions, gatehousev1alpha1.ConditionAuthorized)
		if authorized == nil || authorized.Status != metav1.ConditionFalse || authorized.Reason != "LeftOut" ||
			!strings.Contains(authorized.Message, future+" ("+e.name+" may not list secrets there)") {
			return fmt.Errorf("Authorized: %+v", authorized)
		}
		return nil
	})
	if strings.Contains(authorized.Message, hidden) {
		t.Fatalf("the status names %s, a namespace the author may not read, selected by label: %s", hidden, authorized.Message)
	}
	// A later change of the author's own is published; what they may not
	// read is not.
	if err := e.user.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: "mine-2", Labels: certs}}); err != nil {
		t.Fatal(err)
	}
	waitPublished("secret " + e.team + "/mine-2")
	if got := published(); strings.Contains(got, "leak") {
		t.Fatalf("a namespace the author may not read is published to them:\n%s", got)
	}

	// Once the author may read future's Secrets, it joins: namespaces are
	// checked again when one changes, here a label on future.
	// (ClusterRole view reads no Secrets: a Role of its own.)
	reader := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: future, Name: "secret-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: future, Name: "secret-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: e.name}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: reader.Name}}
	for _, obj := range []client.Object{reader, binding} {
		if err := e.admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	tries := 0
	eventually(t, "future is read once the author may", func() error {
		if tries++; tries%10 == 1 {
			obj := &corev1.Namespace{}
			if err := e.admin.Get(ctx, types.NamespacedName{Name: future}, obj); err != nil {
				return err
			}
			obj.Labels["touched"] = fmt.Sprint(tries)
			if err := e.admin.Update(ctx, obj); err != nil {
				return err
			}
		}
		if !strings.Contains(published(), "secret "+future+"/leak") {
			return errors.New("not published yet")
		}
		return nil
	})
}

// countingSARs counts the SubjectAccessReviews a rest.Config's clients
// send about user.
type countingSARs struct {
	user  string
	count atomic.Int64
}

func (c *countingSARs) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/subjectaccessreviews") && r.Body != nil {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var sar authorizationv1.SubjectAccessReview
			if json.Unmarshal(body, &sar) == nil && sar.Spec.User == c.user {
				c.count.Add(1)
			}
		}
		return rt.RoundTrip(r)
	})
}

// TestConfigcheckForgedIdentitiesLearnNothing is issue 26's forged
// identity, on a Gatehouse serving without client certificates (the
// chart's default): a client with no Kubernetes identity posts config
// reviews straight to the port under made-up userInfos. Before, each post
// made Gatehouse send dozens of SubjectAccessReviews about that identity,
// the refusals told the caller that identity's rights, and a post claiming
// system:masters had the config's template render the cluster's Secrets
// into the refusal. Now no review is sent for them and nothing of the
// cluster is rendered for them.
func TestConfigcheckForgedIdentitiesLearnNothing(t *testing.T) {
	forged := "forged-" + randSuffix()
	counter := &countingSARs{user: forged}
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.Wrap(counter.wrap)
	opts := configcheckOptions()
	opts.RestConfig = cfg
	opts.Server.ClientAuth = testenv.NoClientAuth
	g := startGatehouse(t, opts)
	// Each post renders the config over empty watched resources.
	entriesLinked(t)
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: g.TLSConfig}}
	ctx := context.Background()

	// A Secret the forged administrator would have the template read.
	victim := namespace(t, "victim")
	secretName := "db-password-" + randSuffix()
	if err := controlPlane.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: secretName, Labels: map[string]string{"cert": "true"}}}); err != nil {
		t.Fatal(err)
	}
	spy := &gatehousev1alpha1.HAProxyTemplateConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatehousev1alpha1.GroupVersion.String(), Kind: "HAProxyTemplateConfig"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "attacker", Name: "spy"},
		Spec: gatehousev1alpha1.HAProxyTemplateConfigSpec{
			WatchedResources: map[string]gatehousev1alpha1.WatchedResource{
				"secrets": {APIVersion: "v1", Resources: "secrets", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"cert": "true"}}},
				"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "team", Operator: metav1.LabelSelectorOpExists}}}},
			},
			HAProxyConfig: gatehousev1alpha1.Template{Template: authzTemplate +
				`{{ range .resources.secrets.List }}{{ fail (printf "found %s/%s" .metadata.namespace .metadata.name) }}{{ end }}`},
		},
	}
	post := func(user authenticationv1.UserInfo) *admissionv1.AdmissionResponse {
		return postObjectReview(t, anonymous, g.URL+configcheck.ConfigWebhookPath,
			metav1.GroupVersionKind{Group: gatehousev1alpha1.GroupVersion.Group, Version: gatehousev1alpha1.GroupVersion.Version, Kind: "HAProxyTemplateConfig"},
			metav1.GroupVersionResource{Group: gatehousev1alpha1.GroupVersion.Group, Version: gatehousev1alpha1.GroupVersion.Version, Resource: "haproxytemplateconfigs"},
			"attacker", user, spy)
	}
	// A record naming the poster (a forged post carries whatever it
	// likes; unsigned, it is refused too, but only after the spec is
	// judged, which is what this test watches).
	record := func(user authenticationv1.UserInfo) {
		b, _ := json.Marshal(user)
		spy.Annotations = map[string]string{configcheck.AuthorAnnotation: string(b)}
	}

	admin := authenticationv1.UserInfo{Username: forged, Groups: []string{"system:masters", "system:authenticated"}}
	record(admin)
	resp := post(admin)
	// The template fails naming the first Secret it reads, whichever
	// namespace it is in (before: "found <namespace>/<name>").
	if msg := fmt.Sprint(resp.Result, resp.Warnings); strings.Contains(msg, "found ") || strings.Contains(msg, secretName) {
		t.Fatalf("a post claiming system:masters read a Secret through the template: %s", msg)
	}
	nobody := authenticationv1.UserInfo{Username: forged, Groups: []string{"system:authenticated"}}
	record(nobody)
	const concurrent = 20
	// At once, the fair queue of config checks answers some 503 before
	// anything is checked (one author's namespace may have one waiting):
	// what any answer says is the point, not how many were judged.
	body := createReview(t,
		metav1.GroupVersionKind{Group: gatehousev1alpha1.GroupVersion.Group, Version: gatehousev1alpha1.GroupVersion.Version, Kind: "HAProxyTemplateConfig"},
		metav1.GroupVersionResource{Group: gatehousev1alpha1.GroupVersion.Group, Version: gatehousev1alpha1.GroupVersion.Version, Resource: "haproxytemplateconfigs"},
		"attacker", nobody, spy)
	answers := make([]string, concurrent)
	var wg sync.WaitGroup
	for i := range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := anonymous.Post(g.URL+configcheck.ConfigWebhookPath, "application/json", bytes.NewReader(body))
			if err != nil {
				answers[i] = "error: " + err.Error()
				return
			}
			defer r.Body.Close()
			data, _ := io.ReadAll(r.Body)
			answers[i] = fmt.Sprintf("%d %s", r.StatusCode, data)
		}()
	}
	wg.Wait()
	judged := 0
	for _, a := range answers {
		switch {
		case strings.HasPrefix(a, "200 "):
			judged++
		case strings.HasPrefix(a, "503 "):
		default:
			t.Fatalf("a forged post: %s; want an answer, or 503 from the fair queue", a)
		}
		if strings.Contains(a, "may not") || strings.Contains(a, victim) {
			t.Fatalf("a forged post is told the made-up identity's rights: %s", a)
		}
	}
	if judged == 0 {
		t.Fatal("none of the concurrent posts was judged: nothing was tested")
	}
	t.Logf("SubjectAccessReviews about the forged identity: %d for %d posts", counter.count.Load(), concurrent+1)
	if n := counter.count.Load(); n != 0 {
		t.Fatalf("%d SubjectAccessReviews about an identity only a forged post named; want none", n)
	}
}

// TestConfigcheckRevokedRightStopsPublishing is issue 35's revoked right,
// as the platform sees it: the author may read ConfigMaps of another
// team's namespace (view there), and their config publishes them. The
// administrator takes view away and touches nothing else: no namespace
// event, no write to the config. The ConfigMaps leave the published
// rendering within the periodic re-check (3 s here, 2 minutes by default)
// and the access cache's answer time; before, they stayed published until
// some namespace changed, for ever on a quiet cluster.
func TestConfigcheckRevokedRightStopsPublishing(t *testing.T) {
	e := newAuthzEnv(t)
	startGatehouse(t, app.Options{
		Catalogue: []module.Module{configcheck.New(configcheck.Options{AccessRecheck: 3 * time.Second})},
		Modules:   map[string]app.ModuleConfig{"configcheck": {Enabled: true}},
	})
	e.waitServed(t)
	ctx := context.Background()
	if err := e.admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.victim, Name: "victims-cm"}}); err != nil {
		t.Fatal(err)
	}
	cfg := e.config("revoked", map[string]gatehousev1alpha1.WatchedResource{
		"cms": {APIVersion: "v1", Resources: "configmaps", NamespaceSelector: onlyNamespace(e.victim)},
	})
	cfg.Spec.HAProxyConfig.Template = authzTemplate + "# {{ range .resources.cms.List }}cm {{ .metadata.namespace }}/{{ .metadata.name }} {{ end }}\n"
	eventually(t, "the author's config over a namespace they may read is admitted", func() error {
		err := e.user.Create(ctx, cfg)
		if err != nil && !strings.Contains(err.Error(), "failed calling webhook") {
			t.Fatalf("the author's config: %v", err)
		}
		return err
	})
	published := func() string {
		cm := &corev1.ConfigMap{}
		if err := e.admin.Get(ctx, types.NamespacedName{Namespace: e.team, Name: configcheck.RenderedConfigMapName(cfg.Name)}, cm); err != nil {
			return ""
		}
		return cm.Data["haproxy.cfg"]
	}
	want := "cm " + e.victim + "/victims-cm"
	eventually(t, "the other team's ConfigMap is published while the author may read it", func() error {
		if !strings.Contains(published(), want) {
			return fmt.Errorf("not in the published rendering:\n%s", published())
		}
		return nil
	})
	if err := e.admin.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.victim, Name: "view"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other team's ConfigMap leaves the rendering once the right is taken back", func() error {
		if got := published(); got == "" || strings.Contains(got, want) {
			return fmt.Errorf("still published:\n%s", got)
		}
		return nil
	})
}
