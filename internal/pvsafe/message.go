package pvsafe

import (
	"fmt"
	"strings"
)

// target is the object a DELETE is about, as kubectl names it.
type target struct {
	kind      *protectedKind
	namespace string // "" for cluster-scoped objects
	name      string
}

func (t target) kubectl(verb string, rest ...string) string {
	args := []string{"kubectl"}
	if t.namespace != "" {
		args = append(args, "-n", t.namespace)
	}
	args = append(args, verb, t.kind.short, t.name)
	return strings.Join(append(args, rest...), " ")
}

// A denial is read by a person in kubectl: it names the first risks and the
// first commands, then says how many more there are and gives a command that
// covers them all, so that a namespace of 500 risky claims gets a message of
// a few KB, not hundreds.
const (
	maxListedRisks    = 10
	maxListedCommands = 5
)

// denialMessage explains a denial and gives the concrete ways out, each with
// the exact command. It starts with "DELETION BLOCKED:" so that it is easy to
// spot in kubectl's output and in logs.
//
// In the authorized bypass mode the last way out says which permission the
// label needs; refusal, when not empty, says why a label that is set did not
// take effect.
func denialMessage(v Verdict, t target, retainedClass string, mode BypassMode, refusal string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "DELETION BLOCKED: %s would lose data permanently.\n", v.Reason)
	if len(v.Risks) == 1 && !t.kind.manyClaims {
		fmt.Fprintf(&b, "\nReason: %s.\n", v.Risks[0].Reason)
	} else {
		fmt.Fprintf(&b, "\n%d PersistentVolumeClaim(s) would lose data:\n", len(v.Risks))
		for _, r := range v.Risks[:min(len(v.Risks), maxListedRisks)] {
			fmt.Fprintf(&b, "  - %s: %s\n", r.Claim, r.Reason)
		}
		if more := len(v.Risks) - maxListedRisks; more > 0 {
			fmt.Fprintf(&b, "  ... and %d more; list the claims and their volumes with:\n       kubectl -n %s get pvc -o custom-columns=CLAIM:.metadata.name,VOLUME:.spec.volumeName,CLASS:.spec.storageClassName\n",
				more, v.Risks[0].Namespace)
		}
	}

	if refusal != "" {
		fmt.Fprintf(&b, "\nThe bypass does not apply: %s\n", refusal)
	}

	class := retainedClass
	if class == "" {
		class = "<a VolumeSnapshotClass with deletionPolicy: Retain>"
	}
	b.WriteString("\nTo proceed, do one of:\n")
	n := 1
	var withClaim, volumes []Risk
	for _, r := range v.Risks {
		if r.Claim != "" {
			withClaim = append(withClaim, r)
		}
		if r.Volume != "" {
			volumes = append(volumes, r)
		}
	}
	if len(withClaim) > 0 {
		fmt.Fprintf(&b, "  %d. Snapshot the data and wait until the snapshot is readyToUse (the class must retain it), then delete again:\n", n)
		for _, r := range withClaim[:min(len(withClaim), maxListedCommands)] {
			fmt.Fprintf(&b, "       kubectl -n %s apply -f - <<<'{\"apiVersion\":\"snapshot.storage.k8s.io/v1\",\"kind\":\"VolumeSnapshot\",\"metadata\":{\"name\":\"%s-before-delete\"},\"spec\":{\"volumeSnapshotClassName\":\"%s\",\"source\":{\"persistentVolumeClaimName\":\"%s\"}}}'\n",
				r.Namespace, r.Claim, class, r.Claim)
		}
		if more := len(withClaim) - maxListedCommands; more > 0 {
			fmt.Fprintf(&b, "       ... and the same for the %d other claims\n", more)
		}
		n++
	}
	if len(volumes) > 0 {
		fmt.Fprintf(&b, "  %d. Keep the volume after the deletion by setting its reclaim policy to Retain:\n", n)
		for _, r := range volumes[:min(len(volumes), maxListedCommands)] {
			fmt.Fprintf(&b, "       kubectl patch pv %s -p '{\"spec\":{\"persistentVolumeReclaimPolicy\":\"Retain\"}}'\n", r.Volume)
		}
		if more := len(volumes) - maxListedCommands; more > 0 {
			if t.kind.moreVolumes != nil {
				b.WriteString(t.kind.moreVolumes(t, more))
			} else {
				fmt.Fprintf(&b, "       ... and the same for the %d other volumes\n", more)
			}
		}
		n++
	}
	if mode == BypassAuthorized {
		fmt.Fprintf(&b, "  %d. Accept the data loss, with the permission to bypass (verb %s on %s.%s, ClusterRole %s): label the %s, then delete it again:\n",
			n, BypassVerb, t.kind.plural, BypassGroup, BypassClusterRole, t.kind.short)
	} else {
		fmt.Fprintf(&b, "  %d. Accept the data loss: label the %s, then delete it again:\n", n, t.kind.short)
	}
	fmt.Fprintf(&b, "       %s %s=true\n", t.kubectl("label"), BypassLabel)
	fmt.Fprintf(&b, "       %s\n", t.kubectl("delete"))
	b.WriteString(t.kind.labelNote)
	return b.String()
}
