package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/imagebuild"
)

// supplementalGroupsPolicy: Merge adds the groups the image's /etc/group
// gives the user, Strict does not. The image here is the upstream e2e's
// idea: uid 1000 is a member of group 50000 in the image only.

const groupsImage = "berth.local/groups-in-image:1"

// groupsImageOf is busybox with an /etc/passwd and /etc/group that make
// uid 1000 a member of group 50000.
func groupsImageOf(t *testing.T) ggcrv1.Image {
	t.Helper()
	base, err := imagebuild.BusyboxImage(busyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	files, err := imagebuild.Build([]imagebuild.File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nuser-in-image:x:1000:1000::/tmp:/bin/sh\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\ngroup-in-image:x:50000:user-in-image\n")},
	}, ggcrv1.Config{})
	if err != nil {
		t.Fatal(err)
	}
	layers, err := files.Layers()
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(base, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func groupsPod(name, policy string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000], supplementalGroupsPolicy: %s}
  containers:
  - name: app
    image: %s
    command: ["sleep", "3600"]
`, name, policy, groupsImage)
}

// On containerd 2 both policies run as asked, and each container's status
// reports the identity its process got (status.containerStatuses[].user).
func TestSupplementalGroupsPolicyOnContainerd2(t *testing.T) {
	n := startNodeOnContainerd2(t, quietDisk...)
	importImages(t, n, map[string]ggcrv1.Image{groupsImage: groupsImageOf(t)})
	n.writeManifest("merge.yaml", groupsPod("merge", "Merge"))
	n.writeManifest("strict.yaml", groupsPod("strict", "Strict"))
	for _, tc := range []struct {
		name   string
		groups []int64
	}{
		{"merge", []int64{3000, 4000, 50000}},
		{"strict", []int64{3000, 4000}},
	} {
		pod := n.waitRunning(tc.name, 2*time.Minute)
		want := strings.Trim(fmt.Sprint(tc.groups), "[]")
		if out := strings.TrimSpace(n.exec(pod, "app", "id", "-G")); out != want {
			t.Errorf("%s: id -G is %q, want %q", tc.name, out, want)
		}
		var user *v1.ContainerUser
		waitFor(t, 30*time.Second, tc.name+" reports its user", func() (bool, string) {
			p := n.pod(tc.name)
			if p == nil || len(p.Status.ContainerStatuses) != 1 {
				return false, describe(p)
			}
			user = p.Status.ContainerStatuses[0].User
			return user != nil && user.Linux != nil, fmt.Sprintf("user %+v", user)
		})
		got := user.Linux
		groups := slices.Sorted(slices.Values(got.SupplementalGroups))
		if got.UID != 1000 || got.GID != 3000 || !slices.Equal(groups, tc.groups) {
			t.Errorf("%s: status user %+v, want uid 1000, gid 3000, groups %v", tc.name, got, tc.groups)
		}
	}
}

// containerd 1.6 knows no supplementalGroupsPolicy and would merge the
// image's groups in: a Strict pod is refused with the kubelet's reason, a
// Merge pod runs.
func TestSupplementalGroupsStrictRefusedOnContainerd16(t *testing.T) {
	n := startNodeWithRuntime(t, "", "", quietDisk...) // the host's containerd
	importImages(t, n, map[string]ggcrv1.Image{groupsImage: groupsImageOf(t)})
	n.writeManifest("merge.yaml", groupsPod("merge", "Merge"))
	n.writeManifest("strict.yaml", groupsPod("strict", "Strict"))
	var pod *v1.Pod
	waitFor(t, time.Minute, "strict refused", func() (bool, string) {
		pod = n.pod("strict")
		return pod != nil && pod.Status.Phase == v1.PodFailed, describe(pod)
	})
	if want := "Pod was rejected: SupplementalGroupsPolicy=Strict is not supported in this node"; pod.Status.Reason != "SupplementalGroupsPolicyNotSupported" || pod.Status.Message != want {
		t.Errorf("status %s: %q, want SupplementalGroupsPolicyNotSupported: %q", pod.Status.Reason, pod.Status.Message, want)
	}
	if sbs := n.sandboxes(string(pod.UID)); len(sbs) != 0 {
		t.Errorf("the refused pod got %d sandboxes", len(sbs))
	}
	merge := n.waitRunning("merge", 2*time.Minute)
	if out := strings.TrimSpace(n.exec(merge, "app", "id", "-G")); out != "3000 4000 50000" {
		t.Errorf("merge: id -G is %q, want the image's group merged in", out)
	}
}
