package podsource

import (
	"regexp"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: busybox:1.36
`

// uidOf runs a manifest through the whole pipeline and returns its UID.
func uidOf(t *testing.T, manifest, path, node string) types.UID {
	t.Helper()
	pod, merr := staticPod(document{data: []byte(manifest), line: 1}, path, node)
	if merr != nil {
		t.Fatalf("staticPod: %v", merr)
	}
	return pod.UID
}

func TestStaticPodUID(t *testing.T) {
	base := uidOf(t, podYAML, "/etc/berth/manifests/web.yaml", "node-1")
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(string(base)) {
		t.Errorf("UID %q is not 32 hex digits", base)
	}
	for _, tc := range []struct {
		name           string
		manifest, path string
		node           string
		same           bool
	}{
		{"same input", podYAML, "/etc/berth/manifests/web.yaml", "node-1", true},
		{"comments and layout", "# the web pod\n" + `{"kind": "Pod", "apiVersion": "v1", "spec": {"containers": [{"image": "busybox:1.36", "name": "web"}]}, "metadata": {"name": "web"}}`,
			"/etc/berth/manifests/web.yaml", "node-1", true},
		{"status is ignored", podYAML + "status:\n  phase: Running\n", "/etc/berth/manifests/web.yaml", "node-1", true},
		{"content", podYAML + "    args: [sleep, '1']\n", "/etc/berth/manifests/web.yaml", "node-1", false},
		{"a field set to its default", podYAML + "  restartPolicy: Always\n", "/etc/berth/manifests/web.yaml", "node-1", false},
		{"path", podYAML, "/etc/berth/manifests/web2.yaml", "node-1", false},
		{"node", podYAML, "/etc/berth/manifests/web.yaml", "node-2", false},
	} {
		got := uidOf(t, tc.manifest, tc.path, tc.node)
		if (got == base) != tc.same {
			t.Errorf("%s: UID %s, base %s, want same=%v", tc.name, got, base, tc.same)
		}
	}
}

func TestApplyStaticIdentity(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"team": "a"}, Generation: 3},
		Spec: v1.PodSpec{
			NodeName: "elsewhere",
			Tolerations: []v1.Toleration{
				{Key: "k", Operator: v1.TolerationOpEqual, Value: "v", Effect: v1.TaintEffectNoSchedule},
				{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)},
			},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	applyStaticIdentity(pod, "abc", "Node-1")

	if pod.Name != "web-node-1" || pod.Namespace != "default" || pod.UID != "abc" || pod.Spec.NodeName != "Node-1" {
		t.Errorf("identity: name %q namespace %q uid %q nodeName %q", pod.Name, pod.Namespace, pod.UID, pod.Spec.NodeName)
	}
	want := map[string]string{"team": "a", ConfigSourceAnnotationKey: "file", ConfigHashAnnotationKey: "abc"}
	if len(pod.Annotations) != len(want) {
		t.Errorf("annotations %v, want %v", pod.Annotations, want)
	}
	for k, v := range want {
		if pod.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, pod.Annotations[k], v)
		}
	}
	wantTolerations := []v1.Toleration{
		{Key: "k", Operator: v1.TolerationOpEqual, Value: "v", Effect: v1.TaintEffectNoSchedule},
		{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	}
	if len(pod.Spec.Tolerations) != 2 || pod.Spec.Tolerations[0] != wantTolerations[0] || !pod.Spec.Tolerations[1].MatchToleration(&wantTolerations[1]) || pod.Spec.Tolerations[1].TolerationSeconds != nil {
		t.Errorf("tolerations %+v, want %+v", pod.Spec.Tolerations, wantTolerations)
	}
	if pod.Status.Phase != v1.PodPending {
		t.Errorf("phase %q, want Pending", pod.Status.Phase)
	}
	if pod.Generation != 3 || !pod.CreationTimestamp.IsZero() {
		t.Errorf("generation %d, creationTimestamp %v: want untouched", pod.Generation, pod.CreationTimestamp)
	}
	if !IsStaticPod(pod) {
		t.Error("IsStaticPod = false for a file pod")
	}
}

func TestApplyStaticIdentityKeepsNamespaceAndEmptyName(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system"}}
	applyStaticIdentity(pod, "abc", "n")
	if pod.Name != "" || pod.Namespace != "kube-system" {
		t.Errorf("name %q namespace %q", pod.Name, pod.Namespace)
	}
	if len(pod.Spec.Tolerations) != 1 {
		t.Errorf("tolerations %v, want the NoExecute one", pod.Spec.Tolerations)
	}
}

func TestIsStaticPod(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        bool
	}{
		{nil, false},
		{map[string]string{ConfigSourceAnnotationKey: ApiserverSource}, false},
		{map[string]string{ConfigSourceAnnotationKey: FileSource}, true},
		{map[string]string{ConfigSourceAnnotationKey: "http"}, true},
	} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
		if got := IsStaticPod(pod); got != tc.want {
			t.Errorf("IsStaticPod(%v) = %v, want %v", tc.annotations, got, tc.want)
		}
	}
}
