// Package uninstall removes what one Gatehouse install wrote at run time,
// which Helm does not own: its webhook configurations (found by the
// gatehouse.dev/instance label, never another install's) and the conversion
// stanzas of the CRDs it converts (gatehouse.dev/conversion-owner), after
// stopping its Deployment so that no replica's drift repair writes them
// back. `gatehouse uninstall` runs it; the chart runs that as a pre-delete
// hook (docs/install.md, "Uninstall cleanup").
package uninstall
