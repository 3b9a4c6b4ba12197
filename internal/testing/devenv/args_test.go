package devenv

import (
	"slices"
	"testing"
)

// TestGatehouseArgsVerifyTheAPIServerWithClientAuth: make run's Gatehouse
// serves webhook calls only to the client certificate kube-apiserver
// presents (so configcheck runs its checks over the cluster's state);
// without ClientAuth, as the chart's default, no CA is given.
func TestGatehouseArgsVerifyTheAPIServerWithClientAuth(t *testing.T) {
	opts := Options{WebhookAddr: "127.0.0.1:9443", MetricsAddr: "127.0.0.1:8080", ExtraArgs: []string{"--extra"}}
	with := gatehouseArgs(opts, "kubeconfig", "certs", "https://127.0.0.1:9443", "/cp/webhook-client/ca.crt")
	i := slices.Index(with, "--client-ca-file")
	if i < 0 || i+1 >= len(with) || with[i+1] != "/cp/webhook-client/ca.crt" {
		t.Fatalf("args %q lack --client-ca-file /cp/webhook-client/ca.crt", with)
	}
	if with[len(with)-1] != "--extra" {
		t.Errorf("args %q: ExtraArgs come last, so that GATEHOUSE_ARGS overrides", with)
	}
	if without := gatehouseArgs(opts, "kubeconfig", "certs", "https://127.0.0.1:9443", ""); slices.Contains(without, "--client-ca-file") {
		t.Errorf("args without a CA %q name --client-ca-file", without)
	}
}
