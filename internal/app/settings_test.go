package app

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// tunable is a module with settings and flags, as a fifth module would
// declare them.
type tunable struct{ s tunableSettings }

type tunableSettings struct {
	Mode   string   `json:"mode,omitempty"`
	Users  []string `json:"users"`
	Nested struct {
		Limit int `json:"limit,omitempty"`
	} `json:"nested"`
	Quiet bool `json:"quiet,omitempty"`
}

func (s *tunableSettings) Validate(path *field.Path) field.ErrorList {
	if s.Mode != "strict" && s.Mode != "loose" {
		return field.ErrorList{field.NotSupported(path.Child("mode"), s.Mode, []string{"strict", "loose"})}
	}
	return nil
}

func (*tunable) Name() string                             { return "tunable" }
func (*tunable) AddToScheme(*runtime.Scheme) error        { return nil }
func (*tunable) Webhooks() []module.Webhook               { return nil }
func (*tunable) Setup(context.Context, module.Host) error { return nil }
func (m *tunable) Settings() any                          { return &m.s }
func (m *tunable) Flags(fs *module.FlagSet) {
	fs.StringVar(&m.s.Mode, "tunable-mode", m.s.Mode, "The mode.")
	fs.BoolVar(&m.s.Quiet, "tunable-quiet", m.s.Quiet, "Say less.")
	fs.Bool("tunable-test-only", false, "Hidden.")
	fs.Hide("tunable-test-only")
}

func newTunable() *tunable {
	return &tunable{s: tunableSettings{Mode: "strict", Users: []string{"admin"}}}
}

// loadModules writes config as a --config file, parses args as the
// server's command line and configures the modules as app.New does.
func loadModules(t *testing.T, config string, args []string, mods ...module.Module) error {
	t.Helper()
	fs := flag.NewFlagSet("gatehouse", flag.ContinueOnError)
	flags, _ := AddModuleFlags(fs, mods)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadFile(path)
	if err != nil {
		return err
	}
	return ConfigureModules(mods, cfg.Modules, flags)
}

// TestSettingsComeFromTheFileAndFlagsOverrideIt: defaults, then the
// file's modules.<name>.settings, then the flags given, whichever comes
// first on the command line.
func TestSettingsComeFromTheFileAndFlagsOverrideIt(t *testing.T) {
	m := newTunable()
	err := loadModules(t, `
modules:
  tunable:
    enabled: true
    settings:
      mode: loose
      users: []
      nested: {limit: 3}
      quiet: true
`, []string{"--tunable-mode=strict"}, m)
	if err != nil {
		t.Fatal(err)
	}
	if m.s.Mode != "strict" || m.s.Users == nil || len(m.s.Users) != 0 || m.s.Nested.Limit != 3 || !m.s.Quiet {
		t.Errorf("settings %+v; want the flag's mode strict over the file's loose, the file's empty users, limit 3 and quiet", m.s)
	}

	m = newTunable()
	if err := loadModules(t, "modules: {tunable: {enabled: true}}\n", nil, m); err != nil {
		t.Fatal(err)
	}
	if m.s.Mode != "strict" || !slices.Equal(m.s.Users, []string{"admin"}) || m.s.Quiet {
		t.Errorf("settings %+v; want the defaults without settings or flags", m.s)
	}
}

// TestUnknownSettingsAreRefusedWithTheirPath: a misspelt setting never
// leaves the default in force unseen, nested ones included; a module
// without settings takes none; a value the module refuses is named too.
func TestUnknownSettingsAreRefusedWithTheirPath(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{"modules: {tunable: {settings: {mdoe: loose}}}", "modules[tunable].settings.mdoe: Forbidden: no such setting"},
		{"modules: {tunable: {settings: {nested: {limt: 2}}}}", "modules[tunable].settings.nested.limt: Forbidden: no such setting"},
		{"modules: {tunable: {settings: {mode: lax}}}", `modules[tunable].settings.mode: Unsupported value: "lax"`},
		{"modules: {tunable: {settings: {quiet: yes-please}}}", "modules[tunable].settings"},
		{"modules: {plain: {settings: {mode: loose}}}", "modules[plain].settings: Forbidden: module plain takes no settings"},
	} {
		err := loadModules(t, tc.config, nil, newTunable(), setupThat{name: "plain"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.config, err, tc.want)
		}
	}
	// A misspelt key beside settings is refused when the file is read.
	if err := loadModules(t, "modules: {tunable: {setings: {mode: loose}}}", nil, newTunable()); err == nil || !strings.Contains(err.Error(), `unknown field "setings"`) {
		t.Errorf("modules.tunable.setings: error %v, want the unknown field", err)
	}
}

// TestModuleFlagsKeepTheirForm: a module's flags reach the server's flag
// set under their own names and defaults, switches stay switches, and a
// hidden one is named for --help to leave out.
func TestModuleFlagsKeepTheirForm(t *testing.T) {
	m := newTunable()
	fs := flag.NewFlagSet("gatehouse", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	_, hidden := AddModuleFlags(fs, []module.Module{m, setupThat{name: "plain"}})
	if !slices.Equal(hidden, []string{"tunable-test-only"}) {
		t.Errorf("hidden %v, want [tunable-test-only]", hidden)
	}
	if f := fs.Lookup("tunable-mode"); f == nil || f.DefValue != "strict" || f.Value.(interface{ Type() string }).Type() != "string" {
		t.Errorf("--tunable-mode: %+v; want a string flag defaulting to strict", f)
	}
	if err := fs.Parse([]string{"--tunable-quiet"}); err != nil || !m.s.Quiet {
		t.Errorf("--tunable-quiet as a switch: %v, quiet %v", err, m.s.Quiet)
	}
}
