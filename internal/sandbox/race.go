//go:build race

package sandbox

// raceBuild: this binary runs under ThreadSanitizer (a test binary built
// with -race), whose runtime needs far more address space than the program.
const raceBuild = true
