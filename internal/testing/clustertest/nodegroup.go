package clustertest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha2"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// NodeGroupPolicyDenied starts the API server's message for a NodeGroup
// the nodegroup module's policy webhook refused.
const NodeGroupPolicyDenied = `admission webhook "nodegroup-policy.gatehouse.dev" denied the request: `

// nodeGroupCRD is the NodeGroup CRD's name.
var nodeGroupCRD = "nodegroups." + ngv1.GroupVersion.Group

// NodeGroupScheme knows the three NodeGroup versions, so that one client can
// write through any of them: the Go type picks the version.
var NodeGroupScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		ngv1.AddToScheme, v1alpha1.AddToScheme, v1alpha2.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// NodeGroupClient is a client of cfg on NodeGroupScheme; warnings, if not
// nil, receives the warnings the API server relays.
func NodeGroupClient(t testing.TB, cfg *rest.Config, warnings rest.WarningHandler) client.Client {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	if warnings != nil {
		cfg.WarningHandler = warnings
	}
	// A logger of its own: controller-runtime's global one complains on
	// stderr, in the middle of benchmark output, when nobody set it.
	c, err := client.New(cfg, client.Options{Scheme: NodeGroupScheme, Log: testr.NewWithInterface(t, testr.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NodeGroupClassRef is the instance class the tests' cloud NodeGroups
// name.
func NodeGroupClassRef() ngv1.ClassReference {
	return ngv1.ClassReference{Kind: "OpenStackInstanceClass", Name: "worker"}
}

// ServeNodeGroups starts Gatehouse with opts (the nodegroup module among
// its modules) and waits, probing through c, until the API server converts
// and validates NodeGroups through it. On cleanup it removes the webhook
// configuration and the CRD's conversion stanza, which would otherwise
// point at a stopped server.
func ServeNodeGroups(t testing.TB, cp *testenv.ControlPlane, opts app.Options, c client.Client) *testenv.Gatehouse {
	t.Helper()
	g := StartGatehouse(t, cp, opts)
	// Registered after StartGatehouse's cleanup, so it runs first: the CRD
	// stops pointing at the server before the server stops.
	t.Cleanup(func() {
		ctx := context.Background()
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: nodeGroupCRD}, crd); err == nil {
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
			if err := cp.Client.Update(ctx, crd); err != nil {
				t.Errorf("reset the CRD conversion: %v", err)
			}
		}
	})
	waitUntilServed(t, c)
	return g
}

// waitUntilServed waits until the API server has picked up the CRD's new
// conversion webhook and the new validating webhook: both reach it through
// informers of its own, a moment after Gatehouse wrote them.
func waitUntilServed(t testing.TB, c client.Client) {
	t.Helper()
	ctx := context.Background()
	probe := &v1alpha2.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec:       v1alpha2.NodeGroupSpec{NodeType: v1alpha2.NodeTypeStatic, CRI: &v1alpha2.CRISpec{Type: v1alpha2.CRITypeDocker}},
	}
	Eventually(t, "the API server converts and validates NodeGroups through Gatehouse", func() error {
		err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err == nil {
			return errors.New("a Docker group was admitted")
		}
		if !strings.Contains(err.Error(), NodeGroupPolicyDenied+"it is forbidden to set cri type to Docker") {
			return err
		}
		return nil
	})
}
