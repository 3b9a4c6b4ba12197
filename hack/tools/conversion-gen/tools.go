//go:build tools

// Package tools pins conversion-gen.
package tools

import _ "k8s.io/code-generator/cmd/conversion-gen"
