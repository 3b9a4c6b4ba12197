package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// The API server's audit log says why Gatehouse denied: the denial's reason
// travels as an audit annotation, which kube-apiserver records under the
// webhook's name.
func TestTheAuditLogRecordsTheDenialsReason(t *testing.T) {
	startPVSafe(t, module.Enforce)
	ns := namespace(t, "pvsafe-audit")
	claim, _ := volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)
	mustDeny(t, deleteErr(t, claim), "no VolumeSnapshot")

	key := "pvsafe.gatehouse.dev/" + module.ReasonAnnotation
	if got := auditAnnotation(t, ns, claim.Name, key); got != "claim-would-lose-data" {
		t.Errorf("the deletion's audit event has %s=%q, want claim-would-lose-data", key, got)
	}
}

// auditAnnotation waits for the audit event of the deletion of a claim that
// carries the annotation key, and returns its value.
func auditAnnotation(t *testing.T, namespace, name, key string) string {
	t.Helper()
	var value string
	eventually(t, "the annotation "+key+" in the audit log", func() error {
		f, err := os.Open(controlPlane.AuditLog)
		if err != nil {
			return err
		}
		defer f.Close()
		scanner := bufio.NewScanner(f)
		scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for scanner.Scan() {
			var event struct {
				Verb      string `json:"verb"`
				ObjectRef struct {
					Namespace string `json:"namespace"`
					Name      string `json:"name"`
				} `json:"objectRef"`
				Annotations map[string]string `json:"annotations"`
			}
			if json.Unmarshal(scanner.Bytes(), &event) != nil || event.Verb != "delete" ||
				event.ObjectRef.Namespace != namespace || event.ObjectRef.Name != name {
				continue
			}
			if v, ok := event.Annotations[key]; ok {
				value = v
				return nil
			}
		}
		return fmt.Errorf("no audit event of the deletion of %s/%s with %s yet", namespace, name, key)
	})
	return value
}
