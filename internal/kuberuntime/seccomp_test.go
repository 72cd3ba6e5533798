package kuberuntime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestSeccompProfileRoot(t *testing.T) {
	if got := SeccompProfileRoot("/var/lib/berth"); got != "/var/lib/berth/seccomp" {
		t.Errorf("SeccompProfileRoot = %q, want the kubelet's <root-dir>/seccomp", got)
	}
}

// TestLocalhostSeccompProfile checks that a Localhost profile reaches the
// runtime as an absolute path under the seccomp root, from the container's
// or the pod's security context, and that a profile outside the root, or
// no root at all, is refused naming the field.
func TestLocalhostSeccompProfile(t *testing.T) {
	const root = "/var/lib/berth/seccomp"
	localhost := func(p string) *v1.SeccompProfile {
		return &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &p}
	}
	for _, tc := range []struct {
		name    string
		psc     *v1.PodSecurityContext
		csc     *v1.SecurityContext
		root    string
		wantRef string
		wantErr string
	}{
		{name: "container profile", csc: &v1.SecurityContext{SeccompProfile: localhost("audit.json")}, root: root,
			wantRef: "/var/lib/berth/seccomp/audit.json"},
		{name: "pod profile in a subdirectory", psc: &v1.PodSecurityContext{SeccompProfile: localhost("operator/web/strict.json")}, root: root,
			wantRef: "/var/lib/berth/seccomp/operator/web/strict.json"},
		{name: "redundant elements are cleaned", csc: &v1.SecurityContext{SeccompProfile: localhost("./a//b.json")}, root: root + "/",
			wantRef: "/var/lib/berth/seccomp/a/b.json"},
		{name: "escape", csc: &v1.SecurityContext{SeccompProfile: localhost("../../../etc/passwd")}, root: root,
			wantErr: `securityContext.seccompProfile.localhostProfile: Invalid value: "../../../etc/passwd": must not contain '..'`},
		{name: "backstep that stays inside", psc: &v1.PodSecurityContext{SeccompProfile: localhost("a/../b.json")}, root: root,
			wantErr: `spec.securityContext.seccompProfile.localhostProfile: Invalid value: "a/../b.json": must not contain '..'`},
		{name: "absolute", csc: &v1.SecurityContext{SeccompProfile: localhost("/etc/profile.json")}, root: root,
			wantErr: `securityContext.seccompProfile.localhostProfile: Invalid value: "/etc/profile.json": must be a relative path`},
		{name: "the root itself", csc: &v1.SecurityContext{SeccompProfile: localhost(".")}, root: root,
			wantErr: "must name a file under the seccomp profile root"},
		{name: "no root", csc: &v1.SecurityContext{SeccompProfile: localhost("audit.json")},
			wantErr: `securityContext.seccompProfile.localhostProfile: "audit.json" cannot be resolved: no absolute seccomp profile root`},
		{name: "relative root", csc: &v1.SecurityContext{SeccompProfile: localhost("audit.json")}, root: "seccomp",
			wantErr: "no absolute seccomp profile root"},
	} {
		got, err := seccompProfile(tc.psc, tc.csc, tc.root, false)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v, %v; want error containing %q", tc.name, got, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case got.ProfileType != runtimeapi.SecurityProfile_Localhost || got.LocalhostRef != tc.wantRef:
			t.Errorf("%s: %+v, want Localhost %q", tc.name, got, tc.wantRef)
		}
	}
}

// TestContainerConfigLocalhostSeccomp checks the path through
// ContainerConfig: the error names the container and the field.
func TestContainerConfigLocalhostSeccomp(t *testing.T) {
	p := "../x.json"
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox",
		SecurityContext: &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &p}}}}}}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-1"
	_, err := ContainerConfig(pod, &pod.Spec.Containers[0], ContainerOptions{SeccompProfileRoot: "/var/lib/berth/seccomp"})
	if err == nil || !strings.Contains(err.Error(), `container "app": securityContext.seccompProfile.localhostProfile`) {
		t.Errorf("err = %v, want one naming the container and the field", err)
	}
	p = "ok.json"
	cfg, err := ContainerConfig(pod, &pod.Spec.Containers[0], ContainerOptions{SeccompProfileRoot: "/var/lib/berth/seccomp"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Linux.SecurityContext.Seccomp; got.LocalhostRef != "/var/lib/berth/seccomp/ok.json" {
		t.Errorf("seccomp = %+v", got)
	}
}
