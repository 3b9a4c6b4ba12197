package e2e

import (
	"encoding/json"
	"encoding/pem"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func pemEncode(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
