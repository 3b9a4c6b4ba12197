package module

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Configurable is a module with settings of its own: an operator sets them
// under modules.<name>.settings of the --config file (the chart's
// values.schema.json takes their schema from the struct, internal/manifests), and
// on the command line through the flags the module declares. Neither cmd
// nor the host names a module or a setting: they decode and apply what the
// module declares.
type Configurable interface {
	Module
	// Settings returns a pointer to the module's settings, already
	// defaulted: a struct whose json tags name the settings. The host
	// decodes modules.<name>.settings into it, refusing unknown fields,
	// then applies the flags given on the command line (they override the
	// file). Called before Setup and Webhooks; the module reads its
	// settings there. A struct with a Validate(*field.Path)
	// field.ErrorList method is checked after both.
	Settings() any
	// Flags registers the module's command-line flags on fs, each setting
	// a field of Settings. Names start with the module's name or name its
	// subject (sandbox-runner-dir): they are the flags the server always
	// had, kept as aliases of the settings.
	Flags(fs *FlagSet)
}

// FlagSet is where a module declares flags: the standard library's flag
// set, and Hide for a flag that is no setting for a cluster (one for tests)
// and stays out of --help.
type FlagSet struct {
	*flag.FlagSet
	hidden map[string]bool
}

// NewFlagSet returns an empty FlagSet.
func NewFlagSet(name string) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &FlagSet{FlagSet: fs, hidden: map[string]bool{}}
}

// SplitList reads a comma-separated flag value: items trimmed, empty ones
// dropped; an empty value is an empty, non-nil list (none, not a default).
func SplitList(s string) []string {
	out := []string{}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// Hide keeps the flag name out of --help.
func (fs *FlagSet) Hide(name string) { fs.hidden[name] = true }

// Hidden reports whether Hide was called for name.
func (fs *FlagSet) Hidden(name string) bool { return fs.hidden[name] }

// CommandFlags are the flags modules declare on one command line (the
// server's: Configurable.Flags; `gatehouse test`'s:
// OfflineCheck.SuiteFlags). A flag sets its module's setting when the
// command line is parsed, so that a bad value is refused there, and is
// remembered, so that Replay can give it again: over the configuration
// file's settings (flags override the file), or to fresh instances of the
// modules.
type CommandFlags struct {
	declare func(m Module, fs *FlagSet)
	given   []givenFlag
}

type givenFlag struct {
	module, name, value string
}

// AddCommandFlags registers on fs the flags declare declares for each
// module of mods and returns them, with the names of the hidden ones (kept
// out of --help).
func AddCommandFlags(fs *flag.FlagSet, mods []Module, declare func(m Module, fs *FlagSet)) (*CommandFlags, []string) {
	c := &CommandFlags{declare: declare}
	var hidden []string
	for _, m := range mods {
		own := NewFlagSet(m.Name())
		declare(m, own)
		own.VisitAll(func(f *flag.Flag) {
			fs.Var(&givenValue{Value: f.Value, flags: c, module: m.Name(), name: f.Name}, f.Name, f.Usage)
			if own.Hidden(f.Name) {
				hidden = append(hidden, f.Name)
			}
		})
	}
	return c, hidden
}

// Replay declares the flags of mods again and gives them the values given
// on the command line, in the order given.
func (c *CommandFlags) Replay(mods []Module) error {
	if c == nil {
		return nil
	}
	sets := map[string]*FlagSet{}
	for _, m := range mods {
		own := NewFlagSet(m.Name())
		c.declare(m, own)
		sets[m.Name()] = own
	}
	for _, g := range c.given {
		if own := sets[g.module]; own != nil {
			if err := own.Set(g.name, g.value); err != nil {
				return fmt.Errorf("--%s: %w", g.name, err)
			}
		}
	}
	return nil
}

// givenValue is a module's flag on the command line: set at once, and
// remembered for Replay.
type givenValue struct {
	flag.Value
	flags        *CommandFlags
	module, name string
}

func (v *givenValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return err
	}
	v.flags.given = append(v.flags.given, givenFlag{module: v.module, name: v.name, value: s})
	return nil
}

// IsBoolFlag keeps a switch a switch (--placement-lineage-labels without a
// value).
func (v *givenValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Type is the type name --help shows (pflag's): the wrapped value's own
// Type, else the name pflag derives for a standard library flag ("string"
// for a flag.StringVar, "func" for a flag.Func).
func (v *givenValue) Type() string {
	if t, ok := v.Value.(interface{ Type() string }); ok {
		return t.Type()
	}
	t := reflect.TypeOf(v.Value)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return strings.TrimSuffix(t.Name(), "Value")
}
