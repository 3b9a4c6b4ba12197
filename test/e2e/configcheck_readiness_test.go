package e2e

import (
	"net/url"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// TestConfigcheckReplicaIsReadyOnlyWhenItsConfigsCanBeJudged plays a
// rollout: a new replica starts while a config exists. The Service sends a
// replica admissions as soon as /readyz passes, so the first review it is
// sent must be judged, not answered "still loading" (an upgrade under
// load refused one admission that way: the replica was ready once the
// host's caches had synced, before the config's own informers had).
func TestConfigcheckReplicaIsReadyOnlyWhenItsConfigsCanBeJudged(t *testing.T) {
	e := startConfigcheck(t)
	// The replica of before goes; a new one starts over the same cluster,
	// with the config already there.
	if err := e.g.Stop(); err != nil {
		t.Fatal(err)
	}
	replica := startConfigcheckGatehouse(t)

	// The first review, the moment /readyz passed.
	path := module.RuntimePath("configcheck") + url.PathEscape(e.cfgKey.Namespace) + "/" + url.PathEscape(e.cfgKey.Name) + "/ingresses"
	ing := e.ingress("first", "haproxy", "first.example", "no-such-service", 80)
	ing.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("Ingress"))
	resp := postObjectReview(t, replica.HTTPClient, replica.URL+path,
		metav1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
		metav1.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
		e.app, authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"system:masters"}}, ing)
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "Service 'no-such-service' not found") {
		msg := ""
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		t.Fatalf("first review after /readyz: allowed=%v %q; want it judged against the config's stores (refused: the Service does not exist)", resp.Allowed, msg)
	}

}
