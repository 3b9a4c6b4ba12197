package guard

import (
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/textcut"
)

// DryRun says whether req stores nothing.
func DryRun(req admission.Request) bool { return req.DryRun != nil && *req.DryRun }

// Bounded cuts s to n bytes, saying so.
func Bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "... (cut)"
	if n <= len(more) {
		return more[:max(n, 0)]
	}
	return strings.TrimRight(textcut.Prefix(s, n-len(more)), " \n") + more
}
