// Package catalogue lists the modules built into Gatehouse. It is the only
// package that imports every module: cmd, the host and the offline test
// runner find the modules' settings, flags and offline checks through the
// instances it returns (module.Configurable, module.OfflineChecker).
package catalogue

import (
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/nodegroup"
	"github.com/gatehouse-dev/gatehouse/internal/placement"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
)

// All returns a fresh instance of every built-in module with its default
// settings.
func All() []module.Module {
	return []module.Module{
		pvsafe.New(pvsafe.Options{}),
		nodegroup.New(),
		placement.New(placement.Options{}),
		configcheck.New(configcheck.Options{}),
	}
}
