package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/testing/devenv"
)

// scenario is one kind of load sent to Gatehouse.
type scenario struct {
	Name  string
	Path  string
	Setup func(ctx context.Context, env *devenv.Env) error
	Next  func(i int) request
	// Probe, when set, is a review sent before the load whose response
	// must contain ProbeWant (retried for 30 s while caches fill): it shows
	// that the measured path does the work it claims.
	Probe     func() []byte
	ProbeWant string
	// Sustained, when set, runs each target once for this long at the
	// configured rate instead of in alternating rounds of -requests.
	Sustained time.Duration
	// Rate and Requests, when set, replace -rate and -requests: a path
	// that renders and runs haproxy -c serves tens per second, not
	// thousands.
	Rate     float64
	Requests int
	// Burst, when set, offers these rates in turn (requests per second)
	// and reports the knee instead of one rate's figures.
	Burst []float64
}

// allowed is the text of an admitted review's answer.
const allowed = `"allowed":true`

func scenarios(sustained time.Duration) []scenario {
	generic := genericValidate()
	pvsafe := pvsafeClaimDelete()
	placement := placementPodCreate()
	// The mixed load and the burst reuse the fixtures of the scenarios
	// they are made of.
	pvsafe.Setup, placement.Setup = once(pvsafe.Setup), once(placement.Setup)
	ngValidate, ngConvert := nodegroupValidateUpdate(), nodegroupConvert()
	cc := newConfigcheckFixture()
	// Every module's webhooks in the shares a platform's traffic roughly
	// has: Pods and deletions most, NodeGroup reads and writes, Ingress
	// changes of which few change what HAProxy serves (2 per 1,000 render
	// and run haproxy -c).
	all := []stream{
		{pvsafe, 250}, {placement, 300}, {ngValidate, 100}, {ngConvert, 100},
		{cc.labelOnlyUpdate(), 100}, {cc.otherClassCreate(), 148}, {cc.newHostUpdate(), 2},
	}
	return []scenario{
		generic, pvsafe, placement, ngValidate, ngConvert,
		cc.labelOnlyUpdate(), cc.newHostUpdate(),
		mixed(sustained, all),
		burst(all),
	}
}

// genericValidate is the full server path (guard, decode, dispatch,
// enforcement, metrics, decision log, encode) with the cheapest decision.
func genericValidate() scenario {
	return scenario{
		Name: "generic-validate-unregistered-gvk",
		Path: "/validate",
		Next: func(i int) request {
			return request{Stream: "generic", Want: allowed, Body: fmt.Appendf(nil, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-%d","kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},"namespace":"default","name":"cm-%d","operation":"CREATE","userInfo":{"username":"bench"},"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","namespace":"default"},"data":{"k":"v"}}}}`, i, i, i)}
		},
	}
}

// once runs setup the first time and returns its result ever after.
func once(setup func(context.Context, *devenv.Env) error) func(context.Context, *devenv.Env) error {
	var (
		done bool
		err  error
	)
	return func(ctx context.Context, env *devenv.Env) error {
		if !done {
			done, err = true, setup(ctx, env)
		}
		return err
	}
}
