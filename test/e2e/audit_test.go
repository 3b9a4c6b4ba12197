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
	eventually(t, "the denial's reason in the audit log", func() error {
		f, err := os.Open(controlPlane.AuditLog)
		if err != nil {
			return err
		}
		defer f.Close()
		scanner := bufio.NewScanner(f)
		scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for scanner.Scan() {
			var event struct {
				Stage     string `json:"stage"`
				ObjectRef struct {
					Namespace string `json:"namespace"`
					Name      string `json:"name"`
				} `json:"objectRef"`
				Annotations map[string]string `json:"annotations"`
			}
			if json.Unmarshal(scanner.Bytes(), &event) != nil || event.ObjectRef.Namespace != ns || event.ObjectRef.Name != claim.Name {
				continue
			}
			if got := event.Annotations[key]; got == "claim-would-lose-data" {
				return nil
			} else if event.Stage == "ResponseComplete" {
				return fmt.Errorf("the deletion's audit event has %s=%q: %v", key, got, event.Annotations)
			}
		}
		return fmt.Errorf("no audit event of the deletion of %s/%s yet", ns, claim.Name)
	})
}
