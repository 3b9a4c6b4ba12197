// Package selftest checks an installed Gatehouse from the API server's
// side, as `helm test` runs it (`gatehouse selftest`, the chart's
// templates/tests): the Deployment's replicas are Ready, the install's
// validating webhook configuration exists, and, with pvsafe enabled, a
// dry-run deletion that pvsafe refuses is refused (or, in warn mode,
// admitted with pvsafe's warning): the API server called Gatehouse and
// Gatehouse judged, through the Service and the caBundle the cluster has.
package selftest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// FieldManager applies the probe volume.
const FieldManager = "gatehouse-selftest"

// DenialText is what pvsafe says of the probe volume, in its denial or,
// in warn mode, its warning.
const DenialText = "reclaimPolicy Delete deletes the volume"

// Options configure Run.
type Options struct {
	// Config reaches the API server as the test's identity; its
	// WarningHandler is replaced, to hear pvsafe's warn-mode answer.
	Config *rest.Config
	// Namespace and Deployment name the install's Deployment.
	Namespace, Deployment string
	// ValidatingConfiguration is the install's <instance>-validating.
	ValidatingConfiguration string
	// Volume names the probe PersistentVolume (pvsafe only; empty skips
	// the admission check).
	Volume string
	// Timeout bounds the wait for the replicas and the probe volume.
	Timeout time.Duration
	// Out receives one line per check passed.
	Out io.Writer
}

// warnings collects the API server's warning headers.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	w.seen = append(w.seen, text)
	w.mu.Unlock()
}

func (w *warnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.seen, "\n")
}

// Run runs the checks in order; the first failure ends it.
func Run(ctx context.Context, opts Options) error {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	heard := &warnings{}
	cfg := rest.CopyConfig(opts.Config)
	cfg.WarningHandler = heard
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	if err := poll(ctx, func() error {
		d, err := cs.AppsV1().Deployments(opts.Namespace).Get(ctx, opts.Deployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		if want < 1 || d.Status.ReadyReplicas < want || d.Status.UpdatedReplicas < want {
			return fmt.Errorf("%d of %d replicas Ready (%d updated)", d.Status.ReadyReplicas, want, d.Status.UpdatedReplicas)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("deployment %s/%s: %w", opts.Namespace, opts.Deployment, err)
	}
	fmt.Fprintf(opts.Out, "ok: every replica of deployment %s/%s is Ready\n", opts.Namespace, opts.Deployment)

	vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, opts.ValidatingConfiguration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("validating webhook configuration: %w", err)
	}
	if len(vwc.Webhooks) == 0 {
		return fmt.Errorf("validating webhook configuration %s holds no webhook", vwc.Name)
	}
	fmt.Fprintf(opts.Out, "ok: validating webhook configuration %s holds %d webhooks\n", vwc.Name, len(vwc.Webhooks))

	if opts.Volume == "" {
		return nil
	}
	return probeVolume(ctx, cs, opts, heard)
}

// probeVolume applies a PersistentVolume pvsafe refuses to delete (an
// Available volume whose reclaimPolicy Delete would destroy it), asks for
// its deletion with a server-side dry run, and removes it (Retain first,
// which pvsafe lets through). The volume can hold nothing: its CSI driver
// does not exist, it is pre-bound to a claim no one makes, and no
// StorageClass has its name.
func probeVolume(ctx context.Context, cs kubernetes.Interface, opts Options, heard *warnings) (err error) {
	pvs := cs.CoreV1().PersistentVolumes()
	pv := map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolume",
		"metadata": map[string]any{"name": opts.Volume, "labels": map[string]string{"app.kubernetes.io/component": "selftest"}},
		"spec": map[string]any{
			"capacity":                      map[string]string{"storage": "1Mi"},
			"accessModes":                   []string{"ReadWriteOnce"},
			"persistentVolumeReclaimPolicy": "Delete",
			"storageClassName":              "gatehouse-selftest",
			"claimRef":                      map[string]string{"namespace": opts.Namespace, "name": opts.Volume},
			"csi":                           map[string]string{"driver": "selftest.gatehouse.dev", "volumeHandle": opts.Volume},
		},
	}
	body, err := json.Marshal(pv)
	if err != nil {
		return err
	}
	// The previous run's volume may still be going (its protection
	// finalizer): applied now, it would be the one deleted under us.
	if err := poll(ctx, func() error {
		old, err := pvs.Get(ctx, opts.Volume, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case old.DeletionTimestamp != nil:
			return fmt.Errorf("probe volume %s of a previous run is still being deleted", opts.Volume)
		}
		return nil
	}); err != nil {
		return err
	}
	// Server-side apply names the volume, so the test's RBAC can grant
	// create on this name alone.
	if _, err := pvs.Patch(ctx, opts.Volume, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)}); err != nil {
		return fmt.Errorf("create probe volume %s: %w", opts.Volume, err)
	}
	defer func() {
		// A fresh context: the probe goes even when ctx ran out.
		cleanup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		retain := []byte(`{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}`)
		_, perr := pvs.Patch(cleanup, opts.Volume, types.MergePatchType, retain, metav1.PatchOptions{})
		derr := pvs.Delete(cleanup, opts.Volume, metav1.DeleteOptions{})
		if perr != nil || (derr != nil && !apierrors.IsNotFound(derr)) {
			err = errors.Join(err, fmt.Errorf("remove probe volume %s: %w", opts.Volume, errors.Join(perr, derr)))
		}
	}()
	// pvsafe admits the deletion of a Pending volume (it holds nothing
	// yet): wait for the volume controller to make it Available.
	if err := poll(ctx, func() error {
		got, err := pvs.Get(ctx, opts.Volume, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.VolumeAvailable {
			return fmt.Errorf("probe volume %s is %q, not Available", opts.Volume, got.Status.Phase)
		}
		return nil
	}); err != nil {
		return err
	}
	derr := pvs.Delete(ctx, opts.Volume, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case derr != nil && strings.Contains(derr.Error(), DenialText):
		fmt.Fprintf(opts.Out, "ok: pvsafe refused the dry-run deletion of probe volume %s through the API server\n", opts.Volume)
		return nil
	case derr == nil && strings.Contains(heard.all(), DenialText):
		fmt.Fprintf(opts.Out, "ok: pvsafe (warn) answered the dry-run deletion of probe volume %s with its warning\n", opts.Volume)
		return nil
	case derr != nil:
		return fmt.Errorf("dry-run deletion of probe volume %s: want pvsafe's denial, got: %w", opts.Volume, derr)
	default:
		return fmt.Errorf("dry-run deletion of probe volume %s admitted without pvsafe's answer: is the webhook configured? (warnings: %q)", opts.Volume, heard.all())
	}
}

// poll calls f every half second until it succeeds or ctx ends, returning
// its last error then.
func poll(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}
