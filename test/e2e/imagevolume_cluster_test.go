package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Against the real control plane, on containerd 2: a pod the API server
// accepts with an image volume runs with the image's files mounted
// read-only, a subPath of it too.
func TestImageVolumeClusterOnContainerd2(t *testing.T) {
	cp, client, _ := startControlPlane(t)
	const name = "berth-imgvol"
	kubeconfig, err := cp.NodeKubeconfig(name)
	if err != nil {
		t.Fatal(err)
	}
	n := startNodeOnContainerd2(t, "--node-name", name, "--kubeconfig", kubeconfig, "--node-ip", "127.0.0.1",
		"--port", fmt.Sprint(freePort(t)), "--client-ca-file", cp.KubeletClientCA(), "--node-status-update-frequency", "2s",
		// The machine's disk may be past the image GC's threshold: busybox,
		// used by no pod until the test's comes, must stay.
		"--pinned-image", busybox)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth log:\n%s", n.logTail())
		}
	})
	importImages(t, n, map[string]ggcrv1.Image{imgVolData: dataImage(t, "hello from the cluster\n")})
	waitNodeReady(t, client, name, true, 90*time.Second)

	applyYAML(t, cp, `
apiVersion: v1
kind: Pod
metadata: {name: imgvol, namespace: default}
spec:
  nodeName: `+name+`
  containers:
  - name: app
    image: `+busybox+`
    imagePullPolicy: Never
    command: ["sleep", "3600"]
    volumeMounts:
    - {name: data, mountPath: /vol}
    - {name: data, mountPath: /sub, subPath: data/sub}
  volumes:
  - name: data
    image: {reference: "`+imgVolData+`", pullPolicy: IfNotPresent}
`)
	waitFor(t, 120*time.Second, "imgvol running", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), "imgvol", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning, fmt.Sprintf("%s %+v; node images %v", p.Status.Phase, p.Status.ContainerStatuses, n.imageTags())
	})
	if out := kubectl(t, cp, "exec", "imgvol", "--", "cat", "/vol/data/hello.txt"); out != "hello from the cluster\n" {
		t.Errorf("/vol/data/hello.txt = %q", out)
	}
	if out := kubectl(t, cp, "exec", "imgvol", "--", "cat", "/sub/inner.txt"); out != "inner file\n" {
		t.Errorf("subPath: /sub/inner.txt = %q", out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, errOut, err := cp.Kubectl(ctx, "exec", "imgvol", "--", "touch", "/vol/new")
	if err == nil || !strings.Contains(out+errOut, "Read-only file system") {
		t.Errorf("touch in the image volume: %v, %q; want EROFS", err, out+errOut)
	}
	kubectl(t, cp, "delete", "pod", "imgvol", "--wait=false")
}
