package placement

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// PodRule is the rule of the periodic check's findings in placement's
// PolicyReports.
const PodRule = "pod-affinity-class"

// podFinding is a running Pod's violation as its namespace's PolicyReport
// shows it. The message is the Pod webhook's denial, which names only what
// the Pod's namespace holds (the Pod, its application's HelmRelease) and
// the AffinityClass the release chose: never a tenant's settings from
// Secret cozystack-values.
func podFinding(pod *corev1.Pod, denials []string) module.Finding {
	return module.Finding{
		Subject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Rule:    PodRule,
		Result:  module.ResultFail,
		Message: strings.Join(denials, "\n"),
	}
}

// podUndecided is a running Pod the check could not judge: its lineage
// needs an owner kind beyond MaxOwnerKinds, or a read failed. It is an
// error result, so that what Gatehouse cannot see stands in the report
// beside what it found, not only in a log line. The message is the Pod
// webhook's undecided answer, which names kinds and the bound, nothing a
// tenant's namespace does not hold.
func podUndecided(pod *corev1.Pod, err error) module.Finding {
	return module.Finding{
		Subject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Rule:    PodRule,
		Result:  module.ResultError,
		Message: undecidedMessage(pod.Namespace, pod, err),
	}
}

// undecidedMessage is the answer for a Pod whose placement could not be
// decided, at admission and in the report alike.
func undecidedMessage(namespace string, pod *corev1.Pod, err error) string {
	return fmt.Sprintf("placement of pod %s/%s could not be decided: %v", namespace, podName(pod), err)
}
