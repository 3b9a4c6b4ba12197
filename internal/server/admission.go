package server

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"golang.org/x/sync/semaphore"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

var admissionReviewGVK = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

// Admission serves an admission webhook of moduleName in the given mode.
// It panics when the module's webhooks declare different concurrencies, as
// on a duplicate path.
func (s *Server) Admission(moduleName string, hook module.Webhook, mode module.Enforcement) {
	h, err := s.admissionHandler(moduleName, hook, mode)
	if err != nil {
		panic("server: " + err.Error())
	}
	s.Register(hook.Path, h)
}

func (s *Server) admissionHandler(moduleName string, hook module.Webhook, mode module.Enforcement) (*admissionHandler, error) {
	h := &admissionHandler{server: s, module: moduleName, hook: hook, mode: mode}
	if len(hook.Kinds) > 0 {
		h.kinds = make(map[schema.GroupVersionKind]bool, len(hook.Kinds))
		for _, k := range hook.Kinds {
			h.kinds[k] = true
		}
		metrics.ForeignKinds.WithLabelValues(moduleName)
	}
	if n := hook.Cost.Concurrency; n > 0 {
		sem, err := s.moduleConcurrency(moduleName, n)
		if err != nil {
			return nil, err
		}
		h.concurrency = sem
	}
	// A zero series from the start lets alerts use rate() before the first
	// panic, denial or confirmation.
	metrics.Panics.WithLabelValues(hook.Name, moduleName)
	if hook.Type == module.Validating || hook.Type == module.Mutating {
		for _, reason := range append(slices.Clone(hook.DenialReasons), module.ReasonOther) {
			metrics.Denials.WithLabelValues(hook.Name, moduleName, reason, metrics.DecisionDenied)
		}
	}
	if hook.Confirm != nil {
		for _, result := range []string{module.ConfirmationConfirmed, module.ConfirmationOverturned, module.ConfirmationUndecided} {
			metrics.Confirmations.WithLabelValues(hook.Name, moduleName, result)
		}
	}
	return h, nil
}

type admissionHandler struct {
	server *Server
	module string
	hook   module.Webhook
	mode   module.Enforcement
	// concurrency is the module's bound on its decisions, nil for none.
	concurrency *semaphore.Weighted
	// kinds are the kinds the webhook judges (module.Webhook.Kinds), nil
	// for any.
	kinds map[schema.GroupVersionKind]bool
}

func (h *admissionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, release, ok := h.server.hold(w, r, h.hook.Path, h.concurrency, h.hook.Cost)
	if !ok {
		return
	}
	defer release()
	// The API server waits up to the webhook's declared timeout (at most
	// 30 s), longer than the server's 10 s default: a decision that takes
	// 18 s must still be written whole, not cut into a TLS error. A webhook
	// declaring none, or one the server's write timeout covers, keeps the
	// server's.
	if budget := time.Duration(h.hook.TimeoutSeconds)*time.Second + writeGrace; h.hook.TimeoutSeconds > 0 && budget > h.server.opts.WriteTimeout {
		_ = http.NewResponseController(w).SetWriteDeadline(start.Add(budget))
	}
	var review admissionv1.AdmissionReview
	if err := decodeAdmissionReview(body, &review); err != nil {
		h.server.refuseMalformed(w, h.hook.Path, admissionReviewGVK, err)
		return
	}
	req := admission.Request{AdmissionRequest: *review.Request}

	var (
		d        module.Decision
		panicked bool
	)
	if kind := schema.GroupVersionKind(req.Kind); h.kinds != nil && !h.kinds[kind] {
		// Not this webhook's to judge (the API server never sends it):
		// read as the path's kind, a ConfigMap posted to a Services path
		// was refused as if it were a Service.
		metrics.ForeignKinds.WithLabelValues(h.module).Inc()
		d = module.DecisionOf(admission.Allowed(fmt.Sprintf("%s does not judge %s", h.hook.Name, module.GVKString(kind))))
	} else if _, withdrawn := h.server.withdrawn.Load(h.module); withdrawn {
		// The module stopped deciding: its failure policy decides, as it
		// would once the leader withdrew the webhook.
		d = module.DecisionOf(module.Undecided(fmt.Sprintf("%s: module %s is not running on this replica", h.hook.Name, h.module)))
	} else {
		d, panicked = h.admit(r.Context(), req)
	}
	// Warn mode applies to the confirmed answer: a denial the API server's
	// state overturned warns of nothing.
	if h.hook.Type == module.Validating {
		d = h.mode.Apply(h.module, d)
	}
	// From here on the decision's class says what the answer is: nothing
	// below reads it from the response again. Its value of the decision
	// label (of gatehouse_webhook_requests_total and
	// gatehouse_webhook_denials_total, and of the decision log) counts
	// NotPermitted as a denial.
	decision := metrics.DecisionErrored
	switch d.Class {
	case module.ClassAllowed:
		decision = metrics.DecisionAllowed
	case module.ClassDenied, module.ClassNotPermitted:
		decision = metrics.DecisionDenied
	case module.ClassWarned:
		decision = metrics.DecisionWarned
	case module.ClassUndecided:
		decision = metrics.DecisionUndecided
	}
	denialReason := ""
	if d.Class.IsDenial() {
		d.Response, denialReason = h.withReason(d)
		metrics.Denials.WithLabelValues(h.hook.Name, h.module, denialReason, decision).Inc()
	}
	resp := d.Response
	resp.UID = req.UID

	if d.Class == module.ClassUndecided {
		// A failed call, not an answer: the API server applies the
		// webhook's failurePolicy, and shows this Status's message.
		status := *resp.Result
		status.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
		status.Status = metav1.StatusFailure
		writeJSON(w, http.StatusServiceUnavailable, &status)
	} else {
		status := http.StatusOK
		if panicked {
			status = http.StatusInternalServerError
		}
		answer := resp.AdmissionResponse
		if d.Class.Admits() {
			// kube-apiserver shows nobody an allowed answer's status; its
			// message ("Namespace x holds no claim whose data would be
			// lost (3 claims)") would only tell a caller posting straight
			// to the port what the review did not carry. It stays in the
			// decision log.
			answer.Result = nil
		}
		out := admissionv1.AdmissionReview{Response: &answer}
		out.SetGroupVersionKind(admissionReviewGVK)
		writeJSON(w, status, &out)
	}

	elapsed := time.Since(start)
	metrics.Requests.WithLabelValues(h.hook.Name, h.module, string(req.Operation), decision).Inc()
	metrics.Latency.WithLabelValues(h.hook.Name, h.module).Observe(elapsed.Seconds())
	h.logDecision(req, resp, decision, denialReason, elapsed)
}

// withReason bounds the reason resp's denial gives to the webhook's
// declared set, in the metric and in the audit annotation the API server
// records: whatever a module passes on, neither grows with what a request
// carries.
func (h *admissionHandler) withReason(d module.Decision) (admission.Response, string) {
	resp := d.Response
	reason := module.DenialReason(d, h.hook.DenialReasons)
	annotations := make(map[string]string, len(resp.AuditAnnotations)+1)
	maps.Copy(annotations, resp.AuditAnnotations)
	annotations[module.ReasonAnnotation] = reason
	resp.AuditAnnotations = annotations
	return resp, reason
}

// admit calls the module, and its confirmation when it denies
// (module.Webhook.Decide), turning a panic into a 500 that is logged with
// the request UID and counted; the server keeps serving.
func (h *admissionHandler) admit(ctx context.Context, req admission.Request) (d module.Decision, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			h.server.recordPanic(p, "webhook", h.hook, h.module, req.UID)
			d = module.DecisionOf(admission.Errored(http.StatusInternalServerError, fmt.Errorf("internal error in webhook %s", h.hook.Name)))
			panicked = true
		}
	}()
	// Modules log through log.FromContext: the request's identity is bound
	// once, here.
	ctx = logf.IntoContext(ctx, h.server.opts.Log.WithValues("webhook", h.hook.Name, "module", h.module, "uid", req.UID))
	log := logf.FromContext(ctx)
	d = h.hook.Decide(ctx, req)
	if d.Confirmation != module.OutcomeNone {
		result := d.Confirmation.Result()
		metrics.Confirmations.WithLabelValues(h.hook.Name, h.module, result).Inc()
		switch result {
		case module.ConfirmationOverturned:
			log.Info("denial overturned by the API server's live state (a cache was behind): admitted", "cached", message(d.Denial))
		case module.ConfirmationUndecided:
			log.Info("the denial could not be confirmed against the API server", "cached", message(d.Denial),
				"answer", message(d.Response))
		}
	}
	if err := d.Response.Complete(req); err != nil {
		d = module.DecisionOf(admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode patch: %w", err)))
	}
	return d, false
}

func message(resp admission.Response) string {
	if resp.Result == nil {
		return ""
	}
	return resp.Result.Message
}

func (h *admissionHandler) logDecision(req admission.Request, resp admission.Response, decision, denialReason string, elapsed time.Duration) {
	log := h.server.opts.Log
	switch h.server.opts.LogDecisions {
	case LogNoDecisions:
		return
	case LogDeniedDecisions:
		if decision == metrics.DecisionAllowed {
			// Allowed decisions are most of them: a debug level.
			log = log.V(1)
		}
	}
	kv := []any{
		"webhook", h.hook.Name, "module", h.module,
		"uid", req.UID, "operation", req.Operation,
		"kind", module.GVKString(schema.GroupVersionKind(req.Kind)),
		"namespace", req.Namespace, "name", req.Name,
		"user", req.UserInfo.Username,
		"decision", decision,
		"dryRun", req.DryRun != nil && *req.DryRun,
		"duration", elapsed,
	}
	if resp.Result != nil && resp.Result.Message != "" {
		kv = append(kv, "reason", resp.Result.Message)
	}
	if denialReason != "" {
		kv = append(kv, "denialReason", denialReason)
	}
	if len(resp.Warnings) > 0 {
		kv = append(kv, "warnings", resp.Warnings)
	}
	log.Info("admission decision", kv...)
}

func decodeAdmissionReview(body []byte, review *admissionv1.AdmissionReview) error {
	return decodeReview(body, review, admissionReviewGVK, func() (types.UID, bool) {
		if review.Request == nil {
			return "", false
		}
		return review.Request.UID, true
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
