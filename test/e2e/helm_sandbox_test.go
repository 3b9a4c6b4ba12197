package e2e

import (
	"slices"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestHelmConfigcheckSeparateIdentity: with configcheck on, checks and
// renderings run in a sidecar container under another user and group, which
// gets no ServiceAccount token and nothing of the server's but the shared
// emptyDir; the server alone mounts the token. Off, the Pod is as before.
func TestHelmConfigcheckSeparateIdentity(t *testing.T) {
	objs := renderChart(t, "gatehouse-system", "modules.configcheck.enabled=true")
	pod := findObject[appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken %v: want false, or the runner container gets the token", pod.AutomountServiceAccountToken)
	}
	// The runner is a sidecar (an init container that keeps running): the
	// kubelet stops it only once the server has exited, so that the
	// server's drain still has it (the install suite's upgrade).
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 1 {
		t.Fatalf("want the server and the sandbox runner as its sidecar, got %d containers and %d init containers", len(pod.Containers), len(pod.InitContainers))
	}
	server, runner := pod.Containers[0], pod.InitContainers[0]
	if runner.Name != "sandbox-runner" || runner.Image != server.Image || !slices.Equal(runner.Args[:1], []string{"sandbox-runner"}) {
		t.Fatalf("init container %s %s %v: want sandbox-runner of the server's image", runner.Name, runner.Image, runner.Args)
	}
	if runner.RestartPolicy == nil || *runner.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("sandbox-runner restartPolicy %v: want Always (a sidecar, stopped after the server)", runner.RestartPolicy)
	}
	sc, ssc := runner.SecurityContext, server.SecurityContext
	if sc == nil || ssc == nil || sc.RunAsUser == nil || ssc.RunAsUser == nil || sc.RunAsGroup == nil {
		t.Fatalf("want both users named: server %+v, runner %+v", ssc, sc)
	}
	if *sc.RunAsUser == *ssc.RunAsUser || *sc.RunAsGroup == *ssc.RunAsUser || *sc.RunAsUser == 0 || *sc.RunAsGroup == 0 {
		t.Errorf("runner %d:%d, server %d: want another, non-root identity", *sc.RunAsUser, *sc.RunAsGroup, *ssc.RunAsUser)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("runner security context %+v: want no privilege escalation, a read-only root and no capability", sc)
	}
	wantArgs(t, runner.Args, "--serve-uid="+itoa(*ssc.RunAsUser), "--dir=/run/gatehouse-sandbox")
	wantArgs(t, server.Args, "--sandbox-runner-dir=/run/gatehouse-sandbox")
	// Nothing of the server's reaches the runner's environment: its own
	// GOMEMLIMIT alone (the processes it starts get an empty one).
	if len(runner.Env) != 1 || runner.Env[0].Name != "GOMEMLIMIT" || runner.Env[0].ValueFrom != nil || len(runner.EnvFrom) != 0 {
		t.Errorf("runner environment %+v %+v: want its GOMEMLIMIT alone", runner.Env, runner.EnvFrom)
	}
	if len(runner.VolumeMounts) != 1 || runner.VolumeMounts[0].Name != "sandbox" || runner.VolumeMounts[0].MountPath != "/run/gatehouse-sandbox" {
		t.Errorf("runner mounts %+v: want the shared emptyDir alone", runner.VolumeMounts)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	if v := volumes["sandbox"]; v.EmptyDir == nil {
		t.Errorf("the shared volume %+v: want an emptyDir", v)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.FSGroup == nil || *pod.SecurityContext.FSGroup != *sc.RunAsGroup {
		t.Errorf("pod security context %+v: want fsGroup %d, the runner's group", pod.SecurityContext, *sc.RunAsGroup)
	}
	token := false
	for _, m := range server.VolumeMounts {
		if m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" {
			v := volumes[m.Name]
			token = v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil })
		}
	}
	if !token {
		t.Errorf("server mounts %+v: want the projected ServiceAccount token", server.VolumeMounts)
	}

	objs = renderChart(t, "gatehouse-system", "modules.configcheck.enabled=true", "modules.configcheck.separateIdentity=false")
	pod = findObject[appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 || pod.AutomountServiceAccountToken != nil {
		t.Errorf("separateIdentity=false: want one container, no sidecar and the token mounted as usual, got %d containers, %d init containers, automount %v", len(pod.Containers), len(pod.InitContainers), pod.AutomountServiceAccountToken)
	}
}

func itoa(n int64) string {
	return strconv.FormatInt(n, 10)
}
