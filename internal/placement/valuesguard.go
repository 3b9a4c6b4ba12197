package placement

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	json "github.com/go-json-experiment/json/v1"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// admitTenantValues keeps a tenant's placement settings the platform's: a
// user with edit in its namespace may write its Secrets, cozystack-values
// included, and would otherwise allow itself any class. Only the platform
// identities may create, change or delete the settings
// (_namespace.defaultAffinityClass and _namespace.allowedAffinityClasses);
// anyone may change the rest of the Secret. The refusal is NotPermitted:
// warn mode never relaxes it.
func (m *Module) admitTenantValues(_ context.Context, req admission.Request) admission.Response {
	if req.Name != tenantSecretName {
		return admission.Allowed("not a tenant's values")
	}
	if m.isPlatform(req.UserInfo) || (req.Operation == admissionv1.Delete && req.UserInfo.Username == namespaceController) {
		return admission.Allowed("written by the platform")
	}
	var before, after []byte
	if req.Operation != admissionv1.Create {
		s, err := decodeSecret(req.OldObject.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the old Secret: %w", err))
		}
		before = s.Data[tenantValuesKey]
	}
	if req.Operation != admissionv1.Delete {
		s, err := decodeSecret(req.Object.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode Secret: %w", err))
		}
		after = s.Data[tenantValuesKey]
	}
	was, now := parseTenant(req.Namespace, before), parseTenant(req.Namespace, after)
	if sameSettings(was, now) {
		return admission.Allowed("placement settings unchanged")
	}
	return module.NotPermitted(valuesRefusal(req, was, now))
}

func decodeSecret(raw []byte) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if len(raw) == 0 {
		return s, nil
	}
	return s, json.Unmarshal(raw, s)
}

// isPlatform says whether user is one of the platform identities.
func (m *Module) isPlatform(user authenticationv1.UserInfo) bool {
	if slices.Contains(m.opts.PlatformUsers, user.Username) {
		return true
	}
	for _, g := range user.Groups {
		if slices.Contains(m.opts.PlatformGroups, g) {
			return true
		}
	}
	return false
}

// sameSettings says whether two readings of a tenant's values place the
// same way: both no tenant, both unreadable, or the same default and the
// same allow-list (nil, no list, differs from empty, nothing allowed).
func sameSettings(a, b *tenant) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if (a.Err != nil) != (b.Err != nil) {
		return false
	}
	if a.Err != nil {
		return true
	}
	return a.Default == b.Default && (a.Allowed == nil) == (b.Allowed == nil) && slices.Equal(a.Allowed, b.Allowed)
}

func valuesRefusal(req admission.Request, was, now *tenant) string {
	secret := req.Namespace + "/" + tenantSecretName
	what := fmt.Sprintf("may not change its placement settings (_namespace.defaultAffinityClass, _namespace.allowedAffinityClasses in %s): from %s to %s",
		tenantValuesKey, settingsText(was), settingsText(now))
	switch {
	case req.Operation == admissionv1.Delete:
		what = "may not delete it: it holds the namespace's placement settings, and a namespace without them may use any class"
	case req.Operation == admissionv1.Create:
		what = fmt.Sprintf("may not create it with placement settings (_namespace.defaultAffinityClass, _namespace.allowedAffinityClasses in %s): %s",
			tenantValuesKey, settingsText(now))
	}
	return fmt.Sprintf("Secret %s: user %q %s; they are the platform's (the Tenant's settings, written by its chart): ask the platform team to change the Tenant", secret, req.UserInfo.Username, what)
}

// settingsText words a tenant's settings in a refusal.
func settingsText(t *tenant) string {
	switch {
	case t == nil:
		return "none"
	case t.Err != nil:
		return "unreadable values"
	}
	allowed := "any class"
	if t.Allowed != nil {
		allowed = t.allowedText()
	}
	def := t.Default
	if def == "" {
		def = "none"
	}
	return fmt.Sprintf("default %s, allowed %s", def, allowed)
}
