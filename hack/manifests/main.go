// Command manifests prints config/webhook/manifests.yaml: the webhook
// configurations rendered from the built-in modules' declarations.
//
// controller-gen's webhook markers cannot express a namespaceSelector, and the
// generic /validate rules are known only once modules resolve them through
// discovery, so the manifests come from the declarations the server itself
// serves. A test in test/e2e fails when the committed file is stale.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/gatehouse-dev/gatehouse/internal/modules"
	"github.com/gatehouse-dev/gatehouse/internal/testenv"
)

func main() {
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
	out, err := testenv.WebhookManifests(context.Background(), cp, modules.Catalogue())
	_ = cp.Stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
