// Command release assembles a Gatehouse release into a directory and
// publishes it to a registry: what `make release` and `make publish` run.
//
//	release dist    --version vX.Y.Z --dist DIR --binary OS/ARCH=PATH... --image-index ... --chart ...
//	release publish --version vX.Y.Z --dist DIR --registry HOST[:PORT]/PATH [--plain-http]
//
// dist writes, from what make built (the CLI binaries, the image index with
// its SBOM and listing, the chart packaged by helm):
//
//	gatehouse_<v>_<os>_<arch>.tar.gz   the CLI with LICENSE and README.md
//	gatehouse-<v>.tgz                  the chart (version and appVersion <v>)
//	gatehouse-image_<v>.oci.tar        the image index, an OCI image layout in a tar archive
//	gatehouse-image_<v>.spdx.json      the image's SBOM (SPDX 2.3)
//	gatehouse-image_<v>.contents.txt   the image's listing (digests, files, packages)
//	gatehouse_<v>.intoto.json          an in-toto statement of SLSA provenance v1 naming all of the above
//	checksums.txt                      SHA-256 of every file above
//	checksums.txt.sig, cosign.pub      cosign sign-blob's signature of checksums.txt, and its key
//
// Every file but the signature is reproducible: the same commit, Go
// release and --epoch give the same bytes (TestReleaseIsReproducible).
//
// publish checks checksums.txt (and its signature), pushes the image index
// unchanged to REGISTRY/gatehouse:<v> with go-containerregistry, the chart
// to oci://REGISTRY/charts with helm push, and signs both with cosign,
// attesting the provenance and the SBOM on the image (docs/releasing.md).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: release dist|publish [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "dist":
		err = runDist(os.Args[2:])
	case "publish":
		err = runPublish(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "release: unknown command %q: want dist or publish\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}
