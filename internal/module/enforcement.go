package module

import "fmt"

// Enforcement says what a validating module does with a denial.
type Enforcement string

const (
	// Enforce denies the request.
	Enforce Enforcement = "enforce"
	// Warn admits the request and returns the denial text as admission
	// warnings, for gradual roll-outs (pvsafe's dry-run mode, AffinityClass's
	// soft mode).
	Warn Enforcement = "warn"
)

// ParseEnforcement accepts "enforce" or "warn".
func ParseEnforcement(s string) (Enforcement, error) {
	switch Enforcement(s) {
	case Enforce, Warn:
		return Enforcement(s), nil
	}
	return "", fmt.Errorf("enforcement mode %q: want %q or %q", s, Enforce, Warn)
}
