package pvsafe

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// Settings are the module's settings (module.Configurable): the json
// fields of Options, defaulted by New.
func (m *Module) Settings() any { return &m.opts }

// Flags declares --pvsafe-bypass, the setting bypass.
func (m *Module) Flags(fs *module.FlagSet) {
	fs.Var(bypassFlag{&m.opts.Bypass}, "pvsafe-bypass", "What pvsafe's bypass label pv-safe.io/force-delete=true needs: authorized (the deleting user must also be allowed verb bypass in API group pvsafe.gatehouse.dev, ClusterRole gatehouse-pvsafe-bypass) or label (the label alone, as upstream pv-safe).")
}

// bypassFlag is --pvsafe-bypass: a string flag (as --help shows it) that
// refuses a mode pvsafe does not know.
type bypassFlag struct{ mode *BypassMode }

func (f bypassFlag) String() string {
	if f.mode == nil {
		return ""
	}
	return string(*f.mode)
}

func (f bypassFlag) Set(s string) error {
	mode, err := ParseBypassMode(s)
	if err != nil {
		return err
	}
	*f.mode = mode
	return nil
}

func (bypassFlag) Type() string { return "string" }

// Validate refuses a bypass mode pvsafe does not know.
func (o *Options) Validate(path *field.Path) field.ErrorList {
	if _, err := ParseBypassMode(string(o.Bypass)); err != nil {
		return field.ErrorList{field.NotSupported(path.Child("bypass"), o.Bypass, []string{string(BypassAuthorized), string(BypassLabelOnly)})}
	}
	return nil
}
