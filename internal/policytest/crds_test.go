package policytest

import "testing"

// TestACRDAmongTheObjectsDecidesWhetherItsKindIsServed: the suite's API
// server serves a CRD for every custom kind it knows, and the kinds
// tracker reads them as a cluster's: a CRD among the suite's objects
// defines its kind (no object of it needed) and replaces the one served
// for it, so that a CRD not established serves nothing.
func TestACRDAmongTheObjectsDecidesWhetherItsKindIsServed(t *testing.T) {
	const crd = `- apiVersion: apiextensions.k8s.io/v1
  kind: CustomResourceDefinition
  metadata: {name: widgets.example.com}
  spec: {group: example.com, scope: Cluster, names: {kind: Widget, plural: widgets}, versions: [{name: v1, served: true, storage: true}]}
`
	for _, tc := range []struct{ name, objects, readable string }{
		{"established", crd + "  status: {conditions: [{type: Established, status: \"True\"}]}\n", "true"},
		{"not established", crd + "- {apiVersion: example.com/v1, kind: Widget, metadata: {name: w}}\n", "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runProbe(t, probeState+tc.objects+`tests:
- name: widgets
  request: {operation: CREATE, object: `+pod("p", "team-a")+`}
  expect: {allowed: false, messageContains: ["widgets readable: `+tc.readable+`"]}
`)
			if res.Err != nil || len(res.Results) != 1 || !res.Results[0].Passed {
				t.Fatalf("%v %+v", res.Err, res.Results)
			}
		})
	}
}
