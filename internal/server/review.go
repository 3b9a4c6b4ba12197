package server

import (
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"

	json "github.com/go-json-experiment/json/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// What a review that cannot be decided gets is the same for an
// AdmissionReview and a ConversionReview, so it is written once here: a body
// that is no review of the path's kind is refused with 400 before any module
// sees it, and a module's panic is counted and logged with the request's UID
// while the server keeps serving.

// decodeReview decodes body into review, which must be of kind want and
// carry a request with a UID. request reads the decoded review's request
// UID; ok is false when the review holds no request.
func decodeReview(body []byte, review runtime.Object, want schema.GroupVersionKind, request func() (uid types.UID, ok bool)) error {
	if len(body) == 0 {
		return errors.New("request body is empty")
	}
	if err := json.Unmarshal(body, review); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	// Both reviews embed TypeMeta, their ObjectKind. The message quotes what
	// was posted, not its parse ("a/b/c" parses to no group version).
	posted := review.GetObjectKind().(*metav1.TypeMeta)
	if posted.GroupVersionKind() != want {
		return fmt.Errorf("expected apiVersion %q and kind %q, got %q and %q",
			want.GroupVersion().String(), want.Kind, posted.APIVersion, posted.Kind)
	}
	uid, ok := request()
	if !ok {
		return errors.New("the review has no request")
	}
	if uid == "" {
		return errors.New("request.uid is empty")
	}
	return nil
}

// refuseMalformed answers a body that decodeReview refused.
func (s *Server) refuseMalformed(w http.ResponseWriter, path string, want schema.GroupVersionKind, err error) {
	s.refuse(w, path, http.StatusBadRequest, "malformed "+want.Kind+": "+err.Error())
}

// recordPanic counts and logs p, recovered from a module's handler (called
// from the deferred function that recovered it, so that the stack is the
// panic's). handler names it in the log: "webhook" or "conversion".
func (s *Server) recordPanic(p any, handler string, hook module.Webhook, moduleName string, uid types.UID) {
	metrics.Panics.WithLabelValues(hook.Name, moduleName).Inc()
	s.opts.Log.Error(fmt.Errorf("panic: %v", p), handler+" handler panicked",
		"webhook", hook.Name, "uid", uid, "stack", string(debug.Stack()))
}
