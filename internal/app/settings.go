package app

import (
	"errors"
	"flag"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// ModuleFlags are the server's flags that the modules declare
// (module.Configurable.Flags).
type ModuleFlags = module.CommandFlags

// AddModuleFlags registers the flags of every configurable module of mods
// on fs, the server's flag set, and returns them with the names of the
// hidden ones (no setting for a cluster: kept out of --help).
func AddModuleFlags(fs *flag.FlagSet, mods []module.Module) (*ModuleFlags, []string) {
	return module.AddCommandFlags(fs, mods, func(m module.Module, own *module.FlagSet) {
		if c, ok := m.(module.Configurable); ok {
			c.Flags(own)
		}
	})
}

// ConfigureModules gives every configurable module of mods its settings:
// its defaults, then modules.<name>.settings of the configuration file
// (unknown fields refused, with their path), then the flags given
// (flags), then its own validation. A module that takes no settings
// refuses any. cfg and flags may be nil.
func ConfigureModules(mods []module.Module, cfg map[string]ModuleConfig, flags *ModuleFlags) error {
	var errs field.ErrorList
	for _, m := range mods {
		path := field.NewPath("modules").Key(m.Name()).Child("settings")
		raw := cfg[m.Name()].Settings
		c, ok := m.(module.Configurable)
		if !ok {
			if len(raw) > 0 && string(raw) != "null" && string(raw) != "{}" {
				errs = append(errs, field.Forbidden(path, "module "+m.Name()+" takes no settings"))
			}
			continue
		}
		errs = append(errs, decodeSettings(path, raw, c.Settings())...)
	}
	// Each was set once when the command line was parsed: it cannot
	// fail now.
	if err := flags.Replay(mods); err != nil {
		return err
	}
	for _, m := range mods {
		if c, ok := m.(module.Configurable); ok {
			if v, ok := c.Settings().(interface {
				Validate(*field.Path) field.ErrorList
			}); ok {
				errs = append(errs, v.Validate(field.NewPath("modules").Key(m.Name()).Child("settings"))...)
			}
		}
	}
	return errs.ToAggregate()
}

// decodeSettings decodes raw into settings strictly: an unknown or
// repeated field is an error naming its path, so that a misspelt setting
// never leaves the default in force unseen.
func decodeSettings(path *field.Path, raw []byte, settings any) field.ErrorList {
	if len(raw) == 0 {
		return nil
	}
	strict, err := kjson.UnmarshalStrict(raw, settings)
	if err != nil {
		return field.ErrorList{field.Invalid(path, string(raw), err.Error())}
	}
	var errs field.ErrorList
	for _, e := range strict {
		p := path
		var fe kjson.FieldError
		if errors.As(e, &fe) {
			p = childPath(path, fe.FieldPath())
		}
		msg := e.Error()
		if strings.HasPrefix(msg, "unknown field") {
			msg = "no such setting"
		}
		errs = append(errs, field.Forbidden(p, msg))
	}
	return errs
}

// childPath extends path by a dotted JSON path (a.b).
func childPath(path *field.Path, dotted string) *field.Path {
	for _, name := range strings.Split(dotted, ".") {
		if name != "" {
			path = path.Child(name)
		}
	}
	return path
}
