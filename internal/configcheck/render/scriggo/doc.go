// Package scriggo is configcheck's engine for haptic's templates: Scriggo
// (templatingSettings.engine "scriggo"), as haptic's fork of it renders
// them, on upstream github.com/open2b/scriggo.
//
// # How it differs from upstream, and how that is bridged
//
// haptic's fork lexes constructs upstream does not (trim markers,
// render_glob, {{ go M() }}) and checks types loosely where its templates
// read unstructured objects. This package keeps upstream unmodified and
// bridges in front of it: a scanner rewrites the fork's constructs into
// upstream's (preprocess.go), keeping byte offsets, so that their effects
// can be applied to the parsed tree by position. A construct that cannot
// be given the fork's meaning is refused with the reason, never rendered
// differently.
//
// # Security contract
//
// The templates are a config author's; the data are watched objects other
// people write. Nothing here reads a file, the environment or the network:
// templates are read from the config alone, and the only names templates
// see are the ones this package declares. Rendering runs in configcheck's
// render worker with its limits (time, memory, output), as for every
// engine.
package scriggo
