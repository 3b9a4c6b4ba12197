package module

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/textcut"
)

// maxWarningLength keeps each warning within what the API server passes on
// whole (it may truncate warnings over 256 characters), and maxWarningsTotal
// all of a response's warnings (it drops those past 4 KB).
const (
	maxWarningLength = 256
	maxWarningsTotal = 4096
)

// Apply enforces e on a validating decision. In Warn mode a policy denial
// (ClassDenied) becomes an admission with the denial text as warnings
// (ClassWarned); errors (a failure to decide) are left alone, so warn mode
// never hides a broken module, and so are NotPermitted denials, so warn
// mode never lets anyone past their own rights.
func (e Enforcement) Apply(moduleName string, d Decision) Decision {
	if e != Warn || d.Class != ClassDenied {
		return d
	}
	resp := d.Response
	message := ""
	if resp.Result != nil {
		message = resp.Result.Message
	}
	resp.Warnings = append(resp.Warnings, denialWarnings(moduleName, message)...)
	resp.Allowed = true
	resp.Result = nil
	d.Response, d.Class = resp, ClassWarned
	return d
}

// ReasonNotPermitted marks a denial because the requester lacks a right the
// request would exercise through Gatehouse (a config watching what its
// author may not read). Rolling out a policy in warn mode must not open
// that: Apply never relaxes it.
const ReasonNotPermitted metav1.StatusReason = "NotPermitted"

// NotPermitted denies a request that would take its requester further than
// their own rights; it is enforced in every mode.
func NotPermitted(message string) admission.Response {
	resp := Deny(ReasonNotPermittedLabel, message)
	resp.Result.Reason = ReasonNotPermitted
	return resp
}

// denialWarnings splits a denial message into warnings, one per line, the
// first saying which module would have denied.
func denialWarnings(moduleName, message string) []string {
	out := []string{fmt.Sprintf("%s (enforcement: warn) would deny this request:", moduleName)}
	total := len(out[0])
	lines := strings.Split(message, "\n")
	for i, line := range lines {
		line = strings.TrimRight(line, " \t")
		if strings.TrimSpace(line) == "" {
			continue
		}
		// On a character boundary: a warning is text kubectl prints.
		line = textcut.Bound(line, maxWarningLength, "...")
		// Keep room for the line saying how many were left out.
		if total+len(line) > maxWarningsTotal-64 {
			out = append(out, fmt.Sprintf("... %d more lines of the denial left out (warnings are limited to 4 KB)", countNonEmpty(lines[i:])))
			break
		}
		total += len(line)
		out = append(out, line)
	}
	return out
}

// Undecided answers a request the module cannot decide in time (a queue of
// checks too long for the webhook's timeout, caches not synced yet). The
// server turns it into HTTP 503 carrying reason, so the API server applies
// the webhook's failurePolicy at once (Fail refuses the request with reason
// in its message, Ignore admits it) instead of waiting for its timeout.
func Undecided(reason string) admission.Response {
	resp := admission.Errored(http.StatusServiceUnavailable, errors.New(reason))
	resp.Result.Reason = metav1.StatusReasonServiceUnavailable
	return resp
}

func countNonEmpty(lines []string) int {
	n := 0
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}
