package fuzztest

import (
	"encoding/json"
	"fmt"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// JSONSeeds are NodeGroups of apiVersion, as clients and the API server
// write them, for the native fuzz targets of the older versions.
func JSONSeeds(apiVersion string) []string {
	ng := func(name, rest string) string {
		return fmt.Sprintf(`{"apiVersion":%q,"kind":"NodeGroup","metadata":{"name":%q%s}`, apiVersion, name, rest)
	}
	return []string{
		ng("worker", `},"spec":{"nodeType":"Cloud","cloudInstances":{"zones":["a"],"minPerZone":1,"maxPerZone":3,"standby":"10%","classReference":{"kind":"AWSInstanceClass","name":"small"}}}`),
		ng("master", `},"spec":{"nodeType":"Hybrid","cri":{"type":"Containerd","containerd":{"maxConcurrentDownloads":2}}}`),
		ng("front-nm", `},"spec":{"nodeType":"Hybrid"}`),
		ng("pinned", `,"annotations":{"node.deckhouse.io/permanent-node-group":"false"}},"spec":{"nodeType":"Hybrid"}`),
		ng("static", `,"labels":{"a":"b"}},"spec":{"nodeType":"Static","chaos":{"mode":"DrainAndDelete","period":"6h"},"kubelet":{"maxPods":110,"containerLogMaxSize":"50Mi"},"nodeTemplate":{"taints":[{"key":"dedicated","effect":"NoSchedule"}]}},"status":{"ready":1,"conditionSummary":{"ready":"True"}}`),
		ng("saved", `,"annotations":{"gatehouse.dev/nodegroup-conversion-data":"{\"v1\":{\"spec\":{\"nodeType\":\"CloudStatic\",\"cri\":{\"type\":\"ContainerdV2\",\"containerdV2\":{\"maxConcurrentDownloads\":7}},\"chaos\":{\"period\":\"2h30m\"}}}}"}},"spec":{"nodeType":"Hybrid","cri":{"type":"Containerd"},"chaos":{"mode":"Disabled"}}`),
		ng("broken", `,"annotations":{"gatehouse.dev/nodegroup-conversion-data":"{not json"}},"spec":{"nodeType":"Static"}`),
		ng("disruptions", `},"spec":{"nodeType":"Cloud","disruptions":{"approvalMode":"Automatic","automatic":{"drainBeforeApproval":false,"windows":[{"from":"8:00","to":"10:00","days":["Mon"]}]}}}`),
		`{}`,
		`null`,
		`{"spec":{"nodeType":1}}`,
	}
}

// JSONToHubAndBack is the property of the native fuzz targets of the older
// versions: raw, decoded as a NodeGroup of that version and converted to
// v1, converts back without error to an object that encodes and decodes
// again, and that object converts to the same v1 object without the
// provider configuration being consulted (what the hub held is in the
// conversion data). Input that does not decode, or does not convert to v1
// (an unreadable conversion-data annotation, say), is refused: no property.
func JSONToHubAndBack[T any, P Spoke[T]](t *testing.T, raw []byte) {
	t.Helper()
	spoke := P(new(T))
	if err := json.Unmarshal(raw, spoke); err != nil {
		return
	}
	hub := &v1.NodeGroup{}
	if err := spoke.ConvertToHub(WithLookup(evenNamesPermanent), hub); err != nil {
		return
	}
	back := P(new(T))
	if err := back.ConvertFromHub(hub); err != nil {
		t.Fatalf("converted to v1, but not back: %v\nv1: %s", err, AsJSON(hub))
	}
	encoded, err := json.Marshal(back)
	if err != nil {
		t.Fatalf("converted back to an object that does not encode: %v", err)
	}
	reread := P(new(T))
	if err := json.Unmarshal(encoded, reread); err != nil {
		t.Fatalf("converted back to an object that does not decode again: %v\n%s", err, encoded)
	}
	again := &v1.NodeGroup{}
	if err := reread.ConvertToHub(WithLookup(LookupNotAllowed), again); err != nil {
		t.Fatalf("converted back to an object that does not convert to v1 again: %v\nv1: %s\nback: %s", err, AsJSON(hub), encoded)
	}
	if !apiequality.Semantic.DeepEqual(hub, again) {
		t.Fatalf("v1 -> older -> v1 changed the object\nfirst:  %s\nagain:  %s\nvia:    %s", AsJSON(hub), AsJSON(again), encoded)
	}
}
