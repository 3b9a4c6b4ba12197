package configcheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// webhooks are the run-time webhooks of the config: one per watched
// resource with enableValidationWebhook, so that each carries its own
// selectors; all take the config's failurePolicy and timeout.
func (st *configState) webhooks(m *Module) []module.Webhook {
	if st.compiled == nil {
		return nil
	}
	var out []module.Webhook
	for _, name := range slices.Sorted(maps.Keys(st.compiled.Watched)) {
		w := st.compiled.Watched[name]
		if !w.Webhook {
			continue
		}
		scope := admissionregistrationv1.NamespacedScope
		if st.scoped[name] {
			scope = admissionregistrationv1.ClusterScope
		}
		out = append(out, module.Webhook{
			Name: webhookName(st.key, name),
			Path: webhookPath(m.Name(), st.key, name),
			Type: module.Validating,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{w.GVR.Group}, APIVersions: []string{w.GVR.Version},
					Resources: []string{w.GVR.Resource}, Scope: ptr.To(scope),
				},
			}},
			MatchPolicy:       admissionregistrationv1.Equivalent,
			FailurePolicy:     st.compiled.Policy,
			SideEffects:       admissionregistrationv1.SideEffectClassNone,
			TimeoutSeconds:    st.compiled.Timeout,
			NamespaceSelector: w.NamespaceSelector,
			ObjectSelector:    w.LabelSelector,
			Admit:             m.admitWatched(st.key, name),
			Confirm:           m.watchedConfirmation(st.key, name, st.compiled.Timeout),
			DenialReasons:     watchedDenialReasons,
			Cost:              m.watchedCost(),
		})
	}
	return out
}

var unqualified = regexp.MustCompile(`[^a-z0-9-]+`)

// webhookPath is the path of a config's watched resource's webhook:
// "<namespace>/<config>/<watched>" under the module's run-time path, and
// for haptic's kind under "haproxy-haptic.org/" (one segment more: the
// paths of the two kinds never meet).
func webhookPath(moduleName string, key spec.Key, watched string) string {
	path := module.RuntimePath(moduleName)
	if key.Kind == spec.HapticKind {
		path += string(spec.HapticKind) + "/"
	}
	return path + url.PathEscape(key.Namespace) + "/" + url.PathEscape(key.Name) + "/" + url.PathEscape(watched)
}

// webhookName is a stable, valid webhook name for a config's watched
// resource: "<watched>.<config>.<namespace>.configcheck.gatehouse.dev"
// ("...<namespace>.haptic.configcheck.gatehouse.dev" for haptic's kind),
// each part lowercased to DNS label characters. A part longer than 40
// characters is cut and ends with a hash of the whole part, so that two long
// names sharing a prefix never collide.
func webhookName(key spec.Key, watched string) string {
	label := func(s string) string {
		out := strings.Trim(unqualified.ReplaceAllString(strings.ToLower(s), "-"), "-")
		if len(out) > 40 {
			sum := sha256.Sum256([]byte(s))
			out = strings.TrimRight(out[:31], "-") + "-" + hex.EncodeToString(sum[:4])
		}
		if out == "" {
			out = "x"
		}
		return out
	}
	suffix := ".configcheck.gatehouse.dev"
	if key.Kind == spec.HapticKind {
		suffix = ".haptic" + suffix
	}
	return label(watched) + "." + label(key.Name) + "." + label(key.Namespace) + suffix
}

// FailOpenMessage is logged when no config registers a webhook any more;
// docs/configcheck.md says when.
const FailOpenMessage = "no HAProxyTemplateConfig enables a validation webhook: watched resources are not validated (fail-open)"

// registerWebhooks gives the host every config's webhooks.
func (m *Module) registerWebhooks(ctx context.Context) {
	states := m.allStates()
	sort.Slice(states, func(i, j int) bool { return states[i].key.String() < states[j].key.String() })
	var hooks []module.Webhook
	for _, st := range states {
		hooks = append(hooks, st.webhooks(m)...)
	}
	if err := m.host.SetWebhooks(hooks); err != nil {
		logf.FromContext(ctx).Error(err, "registering the watched resources' webhooks")
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(hooks) == 0 && !m.failOpenLogged {
		m.failOpenLogged = true
		logf.FromContext(ctx).Info(FailOpenMessage)
	}
	if len(hooks) > 0 {
		m.failOpenLogged = false
	}
}
