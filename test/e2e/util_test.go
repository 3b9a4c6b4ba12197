package e2e

import (
	"encoding/json"
	"encoding/pem"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/testing/clustertest"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func pemEncode(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// randSuffix is clustertest.RandSuffix: object names unique to this run.
var randSuffix = clustertest.RandSuffix

// impersonated is a client acting as user (in system:authenticated, as
// every authenticated user is), through kube-apiserver's impersonation.
func impersonated(t testing.TB, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: controlPlane.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// entriesLinked waits until the gatehouse binary that serves the render
// workers is linked (testenv.StartGatehouse starts the link without waiting
// for it): a process's first rendering would otherwise wait for the link
// inside a webhook's timeout, which took over 20 s on a loaded machine.
func entriesLinked(t testing.TB) {
	t.Helper()
	if _, err := testenv.GatehouseForEntries(); err != nil {
		t.Fatal(err)
	}
}
