package placement

import (
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// Settings are the module's settings (module.Configurable): the json
// fields of Options, defaulted by New.
func (m *Module) Settings() any { return &m.opts }

// Flags declares the flags of the settings platformUsers, platformGroups
// and lineageLabels.
func (m *Module) Flags(fs *module.FlagSet) {
	fs.Func("placement-platform-users", "Comma-separated users who may change a tenant's placement settings in its cozystack-values Secret and remove a HelmRelease's application label (default "+strings.Join(DefaultPlatformUsers, ",")+"; empty: none).", func(s string) error {
		m.opts.PlatformUsers = module.SplitList(s)
		return nil
	})
	fs.Func("placement-platform-groups", "Comma-separated groups whose members may do what --placement-platform-users may (default "+strings.Join(DefaultPlatformGroups, ",")+"; empty: none).", func(s string) error {
		m.opts.PlatformGroups = module.SplitList(s)
		return nil
	})
	fs.BoolVar(&m.opts.LineageLabels, "placement-lineage-labels", m.opts.LineageLabels, "Label Pods with their Cozystack application (apps.cozystack.io/application.{group,kind,name}, internal.cozystack.io/managed-by-cozystack, internal.cozystack.io/tenantresource) from placement's cached lineage walk, through a mutating Pod webhook, so that Cozystack's lineage webhook need not read the API server for Pods (docs/placement.md, \"Lineage labels\").")
}
