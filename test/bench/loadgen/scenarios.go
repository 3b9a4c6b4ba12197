package main

import (
	"context"
	"fmt"

	"github.com/gatehouse-dev/gatehouse/internal/devenv"
)

// scenario is one kind of AdmissionReview sent to Gatehouse.
type scenario struct {
	Name  string
	Path  string
	Setup func(ctx context.Context, env *devenv.Env) error
	Body  func(i int) []byte
	// Probe, when set, is a review sent before the load whose response
	// must contain ProbeWant (retried for 30 s while caches fill): it shows
	// that the measured path does the work it claims.
	Probe     func() []byte
	ProbeWant string
}

func scenarios() []scenario {
	return []scenario{
		{
			// The full server path (guard, decode, dispatch, enforcement,
			// metrics, decision log, encode) with the cheapest decision.
			Name: "generic-validate-unregistered-gvk",
			Path: "/validate",
			Body: func(i int) []byte {
				return []byte(fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-%d","kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},"namespace":"default","name":"cm-%d","operation":"CREATE","userInfo":{"username":"bench"},"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","namespace":"default"},"data":{"k":"v"}}}}`, i, i, i))
			},
		},
		pvsafeClaimDelete(),
		placementPodCreate(),
	}
}
