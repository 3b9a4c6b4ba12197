package app

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// ModuleConfig switches one module on, sets its enforcement mode and the
// operator's changes to its webhooks.
type ModuleConfig struct {
	Enabled     bool               `json:"enabled"`
	Enforcement module.Enforcement `json:"enforcement,omitempty"`
	// Webhook changes every admission webhook of the module: failurePolicy,
	// timeoutSeconds, namespaceExclusions, objectSelector (docs/install.md,
	// "Configuration"). In managed mode the reconciler writes them; the
	// chart's static mode renders the same values.
	Webhook *webhookconfig.Settings `json:"webhook,omitempty"`
	// Settings are the module's own (module.Configurable), decoded into
	// the module's settings struct when the module is configured
	// (ConfigureModules): unknown fields are refused there, with their
	// path.
	Settings json.RawMessage `json:"settings,omitempty"`
}

// FileConfig is the optional configuration file (--config). Flags given on
// the command line override it.
type FileConfig struct {
	Modules map[string]ModuleConfig `json:"modules"`
}

// LoadFile reads a configuration file, refusing unknown fields so that a typo
// does not silently leave a module off.
func LoadFile(path string) (*FileConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cfg FileConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return &cfg, nil
}

// Validate checks every module's settings on their own; whether a module's
// webhooks accept them is checked when the module is set up (New).
func (c *FileConfig) Validate() error {
	var errs field.ErrorList
	names := make([]string, 0, len(c.Modules))
	for name := range c.Modules {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		mc := c.Modules[name]
		path := field.NewPath("modules").Key(name)
		if mc.Enforcement != "" {
			if _, err := module.ParseEnforcement(string(mc.Enforcement)); err != nil {
				errs = append(errs, field.Invalid(path.Child("enforcement"), mc.Enforcement, err.Error()))
			}
		}
		errs = append(errs, mc.Webhook.Validate(path.Child("webhook"))...)
	}
	return errs.ToAggregate()
}

// ParseModuleList parses "--modules=pvsafe,nodegroup".
func ParseModuleList(s string) []string {
	var out []string
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// ParseEnforcementList parses "--enforcement=pvsafe=warn,placement=enforce".
func ParseEnforcementList(s string) (map[string]module.Enforcement, error) {
	out := map[string]module.Enforcement{}
	for _, item := range ParseModuleList(s) {
		name, mode, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("enforcement %q: want module=enforce|warn", item)
		}
		e, err := module.ParseEnforcement(mode)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", name, err)
		}
		out[name] = e
	}
	return out, nil
}

// resolveModules picks the enabled modules from the catalogue and checks that
// every configured name exists.
func resolveModules(catalogue []module.Module, cfg map[string]ModuleConfig) ([]module.Module, map[string]module.Enforcement, error) {
	byName := map[string]module.Module{}
	for _, m := range catalogue {
		byName[m.Name()] = m
	}
	var unknown []string
	for name := range cfg {
		if _, ok := byName[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		known := make([]string, 0, len(byName))
		for name := range byName {
			known = append(known, name)
		}
		sort.Strings(known)
		return nil, nil, fmt.Errorf("unknown module(s) %s; available: %s", strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	var enabled []module.Module
	modes := map[string]module.Enforcement{}
	for _, m := range catalogue {
		c, ok := cfg[m.Name()]
		if !ok || !c.Enabled {
			continue
		}
		mode := c.Enforcement
		if mode == "" {
			mode = module.Enforce
		}
		if _, err := module.ParseEnforcement(string(mode)); err != nil {
			return nil, nil, fmt.Errorf("module %s: %w", m.Name(), err)
		}
		enabled = append(enabled, m)
		modes[m.Name()] = mode
	}
	return enabled, modes, nil
}
