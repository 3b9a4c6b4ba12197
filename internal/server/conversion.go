package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

var conversionReviewGVK = apiextensionsv1.SchemeGroupVersion.WithKind("ConversionReview")

// Conversion serves a CRD conversion webhook of moduleName.
// It panics when the module's webhooks declare different concurrencies.
func (s *Server) Conversion(moduleName string, hook module.Webhook) {
	h := &conversionHandler{server: s, module: moduleName, hook: hook}
	if n := hook.Cost.Concurrency; n > 0 {
		sem, err := s.moduleConcurrency(moduleName, n)
		if err != nil {
			panic("server: " + err.Error())
		}
		h.concurrency = sem
	}
	// Never behind ClientAuth: kube-apiserver presents no client
	// certificate to conversion webhooks (ClientAuthOptions).
	s.register(hook.Path, h, false)
	metrics.Panics.WithLabelValues(hook.Name, moduleName)
}

type conversionHandler struct {
	server      *Server
	module      string
	hook        module.Webhook
	concurrency *semaphore.Weighted
}

func (h *conversionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, release, ok := h.server.hold(w, r, h.hook.Path, h.concurrency, h.hook.Cost)
	if !ok {
		return
	}
	defer release()
	var review apiextensionsv1.ConversionReview
	if err := decodeConversionReview(body, &review); err != nil {
		h.server.refuseMalformed(w, h.hook.Path, conversionReviewGVK, err)
		return
	}
	req := review.Request

	var (
		objects  []runtime.RawExtension
		err      error
		panicked bool
	)
	if _, withdrawn := h.server.withdrawn.Load(h.module); withdrawn {
		err = fmt.Errorf("%s: module %s is not running on this replica", h.hook.Name, h.module)
	} else {
		objects, err, panicked = h.convert(r.Context(), req)
	}
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID}
	decision := metrics.DecisionAllowed
	if err != nil {
		decision = metrics.DecisionErrored
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	} else {
		resp.ConvertedObjects = objects
		resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	}
	status := http.StatusOK
	if panicked {
		status = http.StatusInternalServerError
	}
	out := apiextensionsv1.ConversionReview{Response: resp}
	out.SetGroupVersionKind(conversionReviewGVK)
	writeJSON(w, status, &out)

	elapsed := time.Since(start)
	metrics.Requests.WithLabelValues(h.hook.Name, h.module, "CONVERT", decision).Inc()
	metrics.Latency.WithLabelValues(h.hook.Name, h.module).Observe(elapsed.Seconds())
	kv := []any{"webhook", h.hook.Name, "module", h.module, "uid", req.UID,
		"desiredAPIVersion", req.DesiredAPIVersion, "objects", len(req.Objects), "decision", decision, "duration", elapsed}
	if err != nil {
		h.server.opts.Log.Info("conversion failed", append(kv, "reason", err.Error())...)
		return
	}
	h.server.opts.Log.V(1).Info("conversion", kv...)
}

func (h *conversionHandler) convert(ctx context.Context, req *apiextensionsv1.ConversionRequest) (objs []runtime.RawExtension, err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			h.server.recordPanic(p, "conversion", h.hook, h.module, req.UID)
			objs, err, panicked = nil, fmt.Errorf("internal error in conversion webhook %s", h.hook.Name), true
		}
	}()
	// Modules log through log.FromContext: the request's identity is bound
	// once, here.
	ctx = logf.IntoContext(ctx, h.server.opts.Log.WithValues("webhook", h.hook.Name, "module", h.module, "uid", req.UID))
	objs, err = h.hook.Convert(ctx, req)
	if err == nil && len(objs) != len(req.Objects) {
		err = fmt.Errorf("conversion returned %d objects for %d", len(objs), len(req.Objects))
	}
	return objs, err, false
}

func decodeConversionReview(body []byte, review *apiextensionsv1.ConversionReview) error {
	err := decodeReview(body, review, conversionReviewGVK, func() (types.UID, bool) {
		if review.Request == nil {
			return "", false
		}
		return review.Request.UID, true
	})
	if err == nil && review.Request.DesiredAPIVersion == "" {
		err = errors.New("request.desiredAPIVersion is empty")
	}
	return err
}
