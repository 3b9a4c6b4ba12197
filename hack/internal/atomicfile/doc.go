// Package atomicfile writes a build's output files whole or not at all:
// an interrupted make image or make release never leaves a truncated file
// under an artifact's name, and a file's mode does not depend on the
// builder's umask (the release is reproducible).
package atomicfile
