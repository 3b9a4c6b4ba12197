// Package catalogue lists the modules built into Gatehouse. It is the only
// package that imports every module.
package catalogue

import (
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/nodegroup"
	"github.com/gatehouse-dev/gatehouse/internal/placement"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
)

// Options are the module settings that come from flags rather than from
// the module's configuration objects.
type Options struct {
	ConfigCheck configcheck.Options
	Placement   placement.Options
	PVSafe      pvsafe.Options
}

// All returns a fresh instance of every built-in module with its defaults.
func All() []module.Module { return Build(Options{}) }

// Build returns a fresh instance of every built-in module.
func Build(opts Options) []module.Module {
	return []module.Module{
		pvsafe.New(opts.PVSafe),
		nodegroup.New(),
		placement.New(opts.Placement),
		configcheck.New(opts.ConfigCheck),
	}
}
