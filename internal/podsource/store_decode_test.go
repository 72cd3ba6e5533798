package podsource

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDecodeAPIPods(t *testing.T) {
	const node = "node-a"
	long := strings.Repeat("a", 250)
	for _, tc := range []struct {
		name string
		in   string
		// want is, per document, "ns/name" for a pod or "ns/name: <error substring>".
		want      []string
		wantLines []int
		fieldErr  []bool // per document: Err is FieldErrors
	}{
		{name: "empty", in: "", want: nil},
		{name: "only separators and comments", in: "---\n# nothing\n---\n", want: nil},
		{
			name: "one pod keeps its name", in: podManifest("web", "busybox:1"),
			want: []string{"default/web"}, wantLines: []int{1},
		},
		{
			name: "namespace kept",
			in:   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: tools\nspec:\n  containers:\n  - name: c\n    image: busybox:1\n",
			want: []string{"tools/web"}, wantLines: []int{1},
		},
		{
			name: "JSON",
			in:   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"busybox:1"}]}}`,
			want: []string{"default/j"}, wantLines: []int{1},
		},
		{
			name:      "each document on its own",
			in:        podManifest("a", "busybox:1") + "---\n" + podManifest("b", "") + "---\n\n" + podManifest("c", "busybox:1"),
			want:      []string{"default/a", "default/b: spec.containers[0].image: Required value", "default/c"},
			wantLines: []int{1, 10, 20}, fieldErr: []bool{false, true, false},
		},
		{
			name: "unknown field", in: podManifest("web", "busybox:1") + "    imagePullPolicyy: Always\n",
			want: []string{`default/web: unknown field "spec.containers[0].imagePullPolicyy"`}, fieldErr: []bool{false},
		},
		{
			name: "YAML syntax, line in the request",
			in:   podManifest("a", "busybox:1") + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: [b\n",
			want: []string{"default/a", "default/: line 13"}, fieldErr: []bool{false, false},
		},
		{
			name: "not a pod", in: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n",
			want: []string{`default/d: kind: Unsupported value: "Deployment"`}, fieldErr: []bool{true},
		},
		{
			name: "another node", in: podManifest("web", "busybox:1") + "  nodeName: node-b\n",
			want: []string{`default/web: spec.nodeName: Invalid value: "node-b": berth runs pods on node "node-a" only`}, fieldErr: []bool{true},
		},
		{
			name: "this node", in: podManifest("web", "busybox:1") + "  nodeName: node-a\n",
			want: []string{"default/web"},
		},
		{
			name: "mirror annotation",
			in:   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    kubernetes.io/config.mirror: x\nspec:\n  containers:\n  - name: c\n    image: busybox:1\n",
			want: []string{`default/web: metadata.annotations[kubernetes.io/config.mirror]: Forbidden`}, fieldErr: []bool{true},
		},
		{
			name: "same name twice",
			in:   podManifest("web", "busybox:1") + "---\n" + podManifest("web", "busybox:2"),
			want: []string{"default/web", `default/web: metadata.name: Duplicate value: "web": pod default/web is already defined by the document at line 1`},
		},
		{
			name: "name too long for the store's file", in: podManifest(long, "busybox:1"),
			want: []string{"default/" + long + ": must be no more than 242 characters"}, fieldErr: []bool{true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := DecodeAPIPods([]byte(tc.in), node)
			if len(docs) != len(tc.want) {
				t.Fatalf("got %d documents, want %d: %+v", len(docs), len(tc.want), docs)
			}
			for i, d := range docs {
				id := d.Namespace + "/" + d.Name
				want, wantErr, isErr := strings.Cut(tc.want[i], ": ")
				switch {
				case id != want:
					t.Errorf("document %d names %s, want %s", i, id, want)
				case isErr && (d.Err == nil || d.Pod != nil):
					t.Errorf("document %d: pod %v, err %v; want error %q", i, d.Pod != nil, d.Err, wantErr)
				case isErr && !strings.Contains(d.Err.Error(), wantErr):
					t.Errorf("document %d: error %q, want it to contain %q", i, d.Err, wantErr)
				case !isErr && (d.Err != nil || d.Pod == nil):
					t.Errorf("document %d: unexpected error %v", i, d.Err)
				case !isErr && (d.Pod.Namespace+"/"+d.Pod.Name != want):
					t.Errorf("document %d: pod %s/%s, want %s", i, d.Pod.Namespace, d.Pod.Name, want)
				}
				if tc.wantLines != nil && d.Line != tc.wantLines[i] {
					t.Errorf("document %d: line %d, want %d", i, d.Line, tc.wantLines[i])
				}
				if tc.fieldErr != nil && d.Err != nil {
					var fe FieldErrors
					if got := errors.As(d.Err, &fe); got != tc.fieldErr[i] {
						t.Errorf("document %d: FieldErrors %v, want %v (%v)", i, got, tc.fieldErr[i], d.Err)
					}
				}
			}
		})
	}
}

func TestDecodeAPIPodsIdentity(t *testing.T) {
	// A pod saved from `berth pods -o yaml` of a static pod: what the server
	// and the node set is dropped, the rest is the user's.
	in := `apiVersion: v1
kind: Pod
metadata:
  name: web
  uid: "0123"
  resourceVersion: "7"
  creationTimestamp: "2024-05-01T10:00:00Z"
  labels: {app: web}
  annotations:
    kubernetes.io/config.source: file
    kubernetes.io/config.hash: abc
    kubernetes.io/config.seen: "2024-05-01T10:00:00Z"
    note: kept
spec:
  containers:
  - name: c
    image: busybox:1
status:
  phase: Running
  podIP: 10.0.0.1
`
	docs := DecodeAPIPods([]byte(in), "node-a")
	if len(docs) != 1 || docs[0].Err != nil {
		t.Fatalf("got %+v", docs)
	}
	p := docs[0].Pod
	if p.UID != "" || p.ResourceVersion != "" || !p.CreationTimestamp.IsZero() {
		t.Errorf("server fields kept: uid %q, resourceVersion %q, created %v", p.UID, p.ResourceVersion, p.CreationTimestamp)
	}
	wantAnn := map[string]string{ConfigSourceAnnotationKey: ApiserverSource, "note": "kept"}
	if len(p.Annotations) != len(wantAnn) {
		t.Errorf("annotations %v, want %v", p.Annotations, wantAnn)
	}
	for k, v := range wantAnn {
		if p.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, p.Annotations[k], v)
		}
	}
	if IsStaticPod(p) {
		t.Error("an API pod must not be static")
	}
	if p.Labels["app"] != "web" || p.Spec.NodeName != "node-a" || p.Status.Phase != v1.PodPending || p.Status.PodIP != "" {
		t.Errorf("labels %v, node %q, status %+v", p.Labels, p.Spec.NodeName, p.Status)
	}
	if p.Spec.RestartPolicy != v1.RestartPolicyAlways || p.Spec.Priority == nil || *p.Spec.Priority != 0 {
		t.Errorf("not defaulted: restartPolicy %q, priority %v", p.Spec.RestartPolicy, p.Spec.Priority)
	}
	if len(p.Spec.Tolerations) != 0 {
		t.Errorf("an API pod gets no tolerations it did not ask for: %v", p.Spec.Tolerations)
	}
}
