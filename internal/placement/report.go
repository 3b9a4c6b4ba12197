package placement

import (
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
