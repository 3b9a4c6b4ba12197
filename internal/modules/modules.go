// Package modules is the catalogue of modules built into Gatehouse. It is the
// only package that imports every module.
package modules

import (
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/nodegroup"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
)

// Catalogue returns a fresh instance of every built-in module.
func Catalogue() []module.Module {
	return []module.Module{
		pvsafe.New(pvsafe.Options{}),
		nodegroup.New(),
	}
}
