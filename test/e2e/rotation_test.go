package e2e

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// TestSelfManagedCARotationUnderLoadFailsNoRequest rotates the CA and the
// serving certificate of a self-managed Gatehouse while writers send
// ConfigMaps through the real kube-apiserver, which calls Gatehouse's
// fail-closed webhook for each: every write must get Gatehouse's own answer
// (admitted, or denied for the labelled ones), none a TLS or call failure,
// and the process is never restarted.
func TestSelfManagedCARotationUnderLoadFailsNoRequest(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "e2e-rotation")
	port := freePort(t)
	guard := &labelGuard{}
	g := startGatehouse(t, app.Options{
		Catalogue:  []module.Module{guard},
		Modules:    map[string]app.ModuleConfig{"labelguard": {Enabled: true}},
		CertSecret: ns + "/gatehouse-serving",
		SelfManagedCerts: &certs.SelfManagedOptions{
			DNSNames:   []string{"localhost"},
			CAValidity: time.Hour, CARenewBefore: 30 * time.Minute,
			LeafValidity: 30 * time.Minute, LeafRenewBefore: 10 * time.Minute,
			// Covers the reconciler's apply and the API server's reload of
			// the webhook configuration.
			Grace: 3 * time.Second,
		},
		Server:         server.Options{Addr: "127.0.0.1:" + port},
		ManageWebhooks: &webhookconfig.Target{URL: "https://localhost:" + port},
	})
	sm := g.Certificates().(*certs.SelfManaged)
	firstCA := sm.CABundle()
	if n := countCerts(firstCA); n != 1 {
		t.Fatalf("initial bundle holds %d CAs, want 1", n)
	}

	var sent, failed, wrongAnswer atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for w := 0; w < 4; w++ {
		writers.Add(1)
		go func(w int) {
			defer writers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				deny := i%5 == 0
				cm := labelled(ns, fmt.Sprintf("w%d-%d", w, i), deny)
				err := controlPlane.Client.Create(ctx, cm)
				sent.Add(1)
				switch {
				case !deny && err == nil, deny && err != nil && strings.Contains(err.Error(), "carries gatehouse.test/deny=true"):
				case err != nil && !strings.Contains(err.Error(), "carries gatehouse.test/deny=true"):
					failed.Add(1)
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
				default:
					wrongAnswer.Add(1)
				}
			}
		}(w)
	}

	start := time.Now()
	if err := sm.RequestCARotation(ctx); err != nil {
		t.Fatal(err)
	}
	// The rotation runs its three phases: the new CA joins the bundle, the
	// serving certificate moves to it, the old CA leaves.
	eventually(t, "the new CA joins the bundle", func() error {
		if n := countCerts(sm.CABundle()); n != 2 {
			return fmt.Errorf("bundle holds %d CAs", n)
		}
		return nil
	})
	eventually(t, "the old CA leaves the bundle", func() error {
		b := sm.CABundle()
		if countCerts(b) != 1 || bytes.Equal(b, firstCA) {
			return fmt.Errorf("bundle holds %d CAs, first CA still there: %v", countCerts(b), bytes.Equal(b, firstCA))
		}
		return nil
	})
	// Keep writing for a while under the new CA alone.
	time.Sleep(3 * time.Second)
	close(stop)
	writers.Wait()
	elapsed := time.Since(start)

	t.Logf("CA rotation under load: %d writes through the API server in %s, %d failed, %d wrong answers",
		sent.Load(), elapsed.Round(100*time.Millisecond), failed.Load(), wrongAnswer.Load())
	if failed.Load() > 0 || wrongAnswer.Load() > 0 {
		t.Fatalf("%d writes failed and %d got a wrong answer during the rotation; first failures: %v", failed.Load(), wrongAnswer.Load(), firstN(failures, 3))
	}
	if sent.Load() < 20 {
		t.Fatalf("only %d writes were sent: the load did not cover the rotation", sent.Load())
	}
	// The API server's configuration now trusts the new CA alone.
	eventually(t, "the webhook configuration carries the rotated bundle", func() error {
		live := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: webhookconfig.ValidatingName}, live); err != nil {
			return err
		}
		for _, w := range live.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, sm.CABundle()) {
				return fmt.Errorf("webhook %s trusts another bundle", w.Name)
			}
		}
		return nil
	})
}

func countCerts(bundle []byte) int {
	n := 0
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return n
		}
		if block.Type == "CERTIFICATE" {
			n++
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
