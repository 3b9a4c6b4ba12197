package uninstall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// Options says which install to remove. Zero values are defaulted in Run.
type Options struct {
	// Client reads and writes the cluster directly (no cache).
	Client client.Client
	// Instance is the install's name (--instance-name). Default "gatehouse".
	Instance string
	// Namespace is the install's namespace, where Deployment runs.
	Namespace string
	// Deployment is stopped first; empty or absent (Gatehouse running
	// elsewhere, or already gone) skips that step.
	Deployment string
	// Timeout bounds the wait for the Deployment's Pods to end. Default 2m.
	Timeout time.Duration
	// Out receives one line per step.
	Out io.Writer
}

// Run stops the Deployment, deletes the install's webhook configurations
// and resets the conversion stanzas it owns. It is idempotent: run again,
// it finds nothing left to do. Before touching anything it checks that
// every CRD it would reset is safe to reset; if one is not, it changes
// nothing and says what to do, so that the cluster keeps working.
func Run(ctx context.Context, opts Options) error {
	if opts.Instance == "" {
		opts.Instance = webhookconfig.DefaultInstance
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	crds, err := ownedConversions(ctx, opts)
	if err != nil {
		return err
	}
	if err := checkResettable(crds); err != nil {
		return err
	}
	if err := stopDeployment(ctx, opts); err != nil {
		return err
	}
	if err := deleteConfigurations(ctx, opts); err != nil {
		return err
	}
	return resetConversions(ctx, opts, crds)
}

// ownedConversions are the CRDs whose conversion webhook this install wrote.
func ownedConversions(ctx context.Context, opts Options) ([]apiextensionsv1.CustomResourceDefinition, error) {
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := opts.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list CustomResourceDefinitions: %w", err)
	}
	var out []apiextensionsv1.CustomResourceDefinition
	for _, crd := range list.Items {
		if crd.Annotations[webhookconfig.ConversionOwnerAnnotation] == opts.Instance {
			out = append(out, crd)
		}
	}
	return out, nil
}

// checkResettable refuses to reset a conversion while objects may be stored
// in a version other than the storage version. With strategy None the API
// server only relabels: an object stored as v1alpha1 would be served as v1
// with v1alpha1's fields. Objects all stored in the storage version are
// served unchanged in it, and relabelled, not converted, in the others:
// a client of an older version sees the storage version's fields
// (docs/install.md, "Uninstall cleanup").
func checkResettable(crds []apiextensionsv1.CustomResourceDefinition) error {
	var unsafe []string
	for _, crd := range crds {
		if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
			continue
		}
		storage := storageVersion(&crd)
		for _, v := range crd.Status.StoredVersions {
			if v != storage {
				unsafe = append(unsafe, fmt.Sprintf("%s (objects may be stored as %s, the storage version is %s)",
					crd.Name, strings.Join(crd.Status.StoredVersions, ", "), storage))
				break
			}
		}
	}
	if len(unsafe) == 0 {
		return nil
	}
	return fmt.Errorf("nothing changed: the conversion of %s cannot be reset to None safely: the API server would serve objects stored in an older version as if they were in the storage version. "+
		"While Gatehouse still runs, rewrite every object in the storage version (for example kubectl get <kind> -A -o json | kubectl replace -f -), "+
		"then set the CRD's status.storedVersions to the storage version alone (kubectl patch crd <name> --subresource=status --type=merge -p '{\"status\":{\"storedVersions\":[\"<storage version>\"]}}'), and run the uninstall again",
		strings.Join(unsafe, "; "))
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// stopDeployment scales the Deployment to zero and waits until its Pods are
// gone: a replica still running would write back, within a second, what
// the next steps delete.
func stopDeployment(ctx context.Context, opts Options) error {
	if opts.Deployment == "" {
		fmt.Fprintln(opts.Out, "no Deployment named: none stopped")
		return nil
	}
	d := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: opts.Namespace, Name: opts.Deployment}
	if err := opts.Client.Get(ctx, key, d); err != nil {
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(opts.Out, "deployment %s not found: none stopped\n", key)
			return nil
		}
		return fmt.Errorf("get deployment %s: %w", key, err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))
		if err := opts.Client.Patch(ctx, d, patch); err != nil {
			return fmt.Errorf("scale deployment %s to zero: %w", key, err)
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return fmt.Errorf("deployment %s: %w", key, err)
	}
	fmt.Fprintf(opts.Out, "deployment %s scaled to zero; waiting for its pods to end\n", key)
	var left []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, opts.Timeout, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := opts.Client.List(ctx, &pods, client.InNamespace(opts.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return false, err
		}
		left = left[:0]
		for _, p := range pods.Items {
			left = append(left, p.Name)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s: pods %v still running after %s: %w", key, left, opts.Timeout, err)
	}
	return nil
}

// deleteConfigurations deletes the install's webhook configurations, found
// by its label: another install's carry another value.
func deleteConfigurations(ctx context.Context, opts Options) error {
	selector := client.MatchingLabels{webhookconfig.InstanceLabel: opts.Instance}
	var errs []error
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := opts.Client.List(ctx, &validating, selector); err != nil {
		return fmt.Errorf("list ValidatingWebhookConfigurations: %w", err)
	}
	for i := range validating.Items {
		errs = append(errs, deleteOne(ctx, opts, &validating.Items[i], "validatingwebhookconfiguration"))
	}
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	if err := opts.Client.List(ctx, &mutating, selector); err != nil {
		return fmt.Errorf("list MutatingWebhookConfigurations: %w", err)
	}
	for i := range mutating.Items {
		errs = append(errs, deleteOne(ctx, opts, &mutating.Items[i], "mutatingwebhookconfiguration"))
	}
	if len(validating.Items)+len(mutating.Items) == 0 {
		fmt.Fprintf(opts.Out, "no webhook configuration labelled %s=%s\n", webhookconfig.InstanceLabel, opts.Instance)
	}
	return errors.Join(errs...)
}

func deleteOne(ctx context.Context, opts Options, obj client.Object, kind string) error {
	// The UID precondition deletes what was listed, not a namesake
	// created since.
	uid := obj.GetUID()
	err := opts.Client.Delete(ctx, obj, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s: %w", kind, obj.GetName(), err)
	}
	fmt.Fprintf(opts.Out, "%s %s deleted\n", kind, obj.GetName())
	return nil
}

// resetConversions sets the conversion of the install's CRDs back to None
// and drops its ownership annotation, so that the API server stops calling
// a Service that is going away.
func resetConversions(ctx context.Context, opts Options, crds []apiextensionsv1.CustomResourceDefinition) error {
	var errs []error
	for i := range crds {
		crd := &crds[i]
		reset, gone := false, false
		// The resourceVersion makes each patch a compare-and-swap: a CRD
		// changed since it was read (its status is written often) is read
		// again, and reset only while it is still this install's and still
		// safe to reset.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if reset {
				if err := opts.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
					gone = apierrors.IsNotFound(err)
					return client.IgnoreNotFound(err)
				}
				if crd.Annotations[webhookconfig.ConversionOwnerAnnotation] != opts.Instance {
					gone = true // taken over since: not this install's to reset
					return nil
				}
				if err := checkResettable([]apiextensionsv1.CustomResourceDefinition{*crd}); err != nil {
					return err
				}
			}
			reset = true
			return opts.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, resetPatch(crd)))
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("reset the conversion of CRD %s: %w", crd.Name, err))
			continue
		}
		if gone {
			fmt.Fprintf(opts.Out, "crd %s: deleted or taken over by another owner since it was read; left as it is\n", crd.Name)
			continue
		}
		served := []string{}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				served = append(served, v.Name)
			}
		}
		slices.Sort(served)
		fmt.Fprintf(opts.Out, "crd %s: conversion reset to None (versions %s are served as stored, in %s)\n", crd.Name, strings.Join(served, ", "), storageVersion(crd))
	}
	return errors.Join(errs...)
}

// resetPatch drops the install's ownership mark from crd and, when its
// stanza is a webhook, sets it to None; a stanza already reset (by hand, or
// by an apply of the CRD's manifest) only loses the mark. It is a merge
// patch carrying crd's resourceVersion.
func resetPatch(crd *apiextensionsv1.CustomResourceDefinition) []byte {
	patch := map[string]any{"metadata": map[string]any{
		"resourceVersion": crd.ResourceVersion,
		"annotations":     map[string]any{webhookconfig.ConversionOwnerAnnotation: nil},
	}}
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		patch["spec"] = map[string]any{"conversion": map[string]any{"strategy": "None", "webhook": nil}}
	}
	raw, _ := json.Marshal(patch) // maps of strings and nil: cannot fail
	return raw
}
