//go:build tools

// Package tools pins cosign, which signs the released image and chart and
// attests the image's SBOM (.github/workflows/release.yml), and which
// hack/image's TestCosignSignsAndVerifiesTheIndex runs offline with a
// local key against an in-process registry.
package tools

import _ "github.com/sigstore/cosign/v2/cmd/cosign"
