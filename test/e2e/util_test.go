package e2e

import (
	"encoding/json"
	"encoding/pem"

	"k8s.io/apimachinery/pkg/util/rand"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func pemEncode(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// randSuffix keeps object names unique, so that the suite can run again on
// the same control plane and in any order.
func randSuffix() string { return rand.String(6) }
