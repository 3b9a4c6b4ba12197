package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// TestManagedCAFileIsFollowed: the CA of --manage-webhooks-ca-file
// (app.Options.ManageWebhooksCAFile) is rotated out of cluster, as a
// platform with its own PKI does, and the webhook configurations' caBundle
// follows the file without a restart, through the real kube-apiserver:
// from a wrong CA (every call fails) to the serving CA (calls answered),
// then through a rotation of the serving certificate to a new CA with an
// overlap, each answer Gatehouse's own.
func TestManagedCAFileIsFollowed(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "e2e-cafile")
	port := freePort(t)
	caPath := filepath.Join(t.TempDir(), "webhook-ca.pem")
	stranger, err := certs.SelfSigned([]string{"localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// A CA that signed nothing Gatehouse serves: what a file left behind
	// by a rotation done elsewhere amounts to.
	if err := os.WriteFile(caPath, stranger.CACert, 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGatehouse(t, app.Options{
		Catalogue:            []module.Module{&labelGuard{}},
		Modules:              map[string]app.ModuleConfig{"labelguard": {Enabled: true}},
		Server:               server.Options{Addr: "127.0.0.1:" + port},
		ManageWebhooks:       &webhookconfig.Target{URL: "https://localhost:" + port},
		ManageWebhooksCAFile: caPath,
	})
	caBundleIs := func(what string, want []byte) {
		t.Helper()
		eventually(t, what, func() error {
			live := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: webhookconfig.ValidatingName}, live); err != nil {
				return err
			}
			if len(live.Webhooks) == 0 {
				return fmt.Errorf("no webhooks in %s", live.Name)
			}
			for _, w := range live.Webhooks {
				if !bytes.Equal(w.ClientConfig.CABundle, want) {
					return fmt.Errorf("webhook %s trusts %d CAs, not the file's %d", w.Name, countCerts(w.ClientConfig.CABundle), countCerts(want))
				}
			}
			return nil
		})
	}
	n := 0
	answered := func(what string) {
		t.Helper()
		eventually(t, what, func() error {
			n++
			if err := controlPlane.Client.Create(ctx, labelled(ns, fmt.Sprintf("plain-%d", n), false)); err != nil {
				return fmt.Errorf("unlabelled ConfigMap: %w", err)
			}
			err := controlPlane.Client.Create(ctx, labelled(ns, fmt.Sprintf("denied-%d", n), true))
			if err == nil || !strings.Contains(err.Error(), "carries gatehouse.test/deny=true") {
				return fmt.Errorf("labelled ConfigMap: want Gatehouse's denial, got %v", err)
			}
			return nil
		})
	}
	// rewrite replaces the file as a mounted volume does (a new inode
	// renamed over it) or in place.
	rewrite := func(data []byte, atomic bool) {
		t.Helper()
		target := caPath
		if atomic {
			target = caPath + ".tmp"
		}
		if err := os.WriteFile(target, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if atomic {
			if err := os.Rename(target, caPath); err != nil {
				t.Fatal(err)
			}
		}
	}

	caBundleIs("the configurations trust the file's CA", stranger.CACert)
	if err := controlPlane.Client.Create(ctx, labelled(ns, "with-the-wrong-ca", false)); err == nil {
		t.Fatal("a write was admitted while the caBundle named a CA that signed nothing Gatehouse serves: is the webhook called?")
	}

	// The file is corrected: the calls work again, with no restart.
	first, err := os.ReadFile(filepath.Join(g.CertDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	rewrite(first, true)
	caBundleIs("the caBundle follows the corrected file", first)
	answered("calls answered once the caBundle names the serving CA")

	// A rotation out of cluster: the new CA joins the bundle, the serving
	// certificate moves to it, the old CA leaves. No call fails on the way.
	next, err := certs.SelfSigned([]string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	overlap := append(append([]byte{}, first...), next.CACert...)
	rewrite(overlap, false)
	caBundleIs("the caBundle holds both CAs", overlap)
	answered("calls answered during the overlap, old serving certificate")
	if err := next.WriteDir(g.CertDir); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new serving certificate is served", func() error {
		if !bytes.Equal(g.Certificates().(certs.CABundler).CABundle(), next.CACert) {
			return fmt.Errorf("serving certificate source has not read the new ca.crt yet")
		}
		return nil
	})
	answered("calls answered during the overlap, new serving certificate")
	rewrite(next.CACert, true)
	caBundleIs("the caBundle holds the new CA alone", next.CACert)
	answered("calls answered under the new CA alone")

}
