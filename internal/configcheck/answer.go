package configcheck

import (
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/redact"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// forCaller redacts what a watched object's answer quotes of what the
// rendering read: a denial, and the warnings of a change admitted over a
// failing state. haproxy's and the check policy's text keeps only the
// names made of the caller's words (redact.Quoted); a render failure loses the
// words of judged's objects the caller did not send (redact.RenderFailure). judged
// are the stores the answer was judged with (nil: none was read).
func forCaller(resp admission.Response, req admission.Request, c *spec.Compiled, judged map[string]render.IndexedStore) admission.Response {
	phase := ""
	if resp.AuditAnnotations != nil {
		phase = resp.AuditAnnotations[module.ReasonAnnotation]
	}
	deniedQuotingHAProxy := !resp.Allowed && (phase == judge.PhaseHAProxy || phase == judge.PhasePolicy)
	deniedRendering := !resp.Allowed && phase == judge.PhaseRender
	if !deniedQuotingHAProxy && !deniedRendering && len(resp.Warnings) == 0 {
		return resp
	}
	var obj, old map[string]any
	_ = utiljson.Unmarshal(req.Object.Raw, &obj)
	_ = utiljson.Unmarshal(req.OldObject.Raw, &old)
	w := redact.WordsOf(req, obj, old)
	var data *redact.RenderWords
	renderText := func(text string) string {
		if data == nil {
			var author redact.Words
			if c != nil {
				author = c.Words
			}
			words := redact.DataWords(judged, author, req.Namespace)
			data = &words
		}
		return redact.RenderFailure(text, w, *data)
	}
	switch {
	case deniedQuotingHAProxy:
		resp.Result.Message = redact.Quoted(resp.Result.Message, w)
	case deniedRendering:
		resp.Result.Message = renderText(resp.Result.Message)
	}
	for i, warning := range resp.Warnings {
		switch {
		case redact.QuotesHAProxy(warning):
			resp.Warnings[i] = redact.Quoted(warning, w)
		case strings.HasPrefix(warning, judge.FailureWarningPrefix):
			resp.Warnings[i] = renderText(warning)
		}
	}
	return resp
}
