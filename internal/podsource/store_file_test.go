package podsource

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/quarantine"
)

// storedPod is a pod as the store keeps it: decoded from a request, with a UID.
func storedPod(t *testing.T, manifest string) *v1.Pod {
	t.Helper()
	docs := DecodeAPIPods([]byte(manifest), "node-a")
	if len(docs) != 1 || docs[0].Err != nil {
		t.Fatalf("decoding %q: %+v", manifest, docs)
	}
	p := docs[0].Pod
	p.UID = "5b0e3c1e-0000-4000-8000-000000000001"
	return p
}

func TestRecordRoundTrip(t *testing.T) {
	pod := storedPod(t, podManifest("web", "busybox:1"))
	data, err := encodeRecord(pod)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRecord(data, "default", "web", "node-a")
	if err != nil {
		t.Fatalf("decodeRecord: %v\n%s", err, data)
	}
	if !samePod(got, pod) || got.UID != pod.UID {
		t.Errorf("read back %+v, want %+v", got, pod)
	}
	// The node name is this node's, whatever the file says: a renamed node
	// keeps its pods.
	got, err = decodeRecord(data, "default", "web", "node-b")
	if err != nil || got.Spec.NodeName != "node-b" {
		t.Errorf("on node-b: node %q, err %v", got.Spec.NodeName, err)
	}
}

func TestDecodeRecordRefuses(t *testing.T) {
	good := storedPod(t, podManifest("web", "busybox:1"))
	encode := func(p *v1.Pod) []byte {
		data, err := encodeRecord(p)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	data := encode(good)
	mutate := func(f func(p *v1.Pod)) []byte {
		p := good.DeepCopy()
		f(p)
		return encode(p)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "unexpected end of JSON input"},
		{"truncated", data[:len(data)/2], "unexpected end of JSON input"},
		{"not a record", []byte(`{"apiVersion":"v1"}`), `unknown field "apiVersion"`},
		{"no checksum", []byte(`{"pod":{}}`), "checksum and pod are required"},
		{"edited", bytes.Replace(data, []byte("busybox:1"), []byte("busybox:2"), 1), "checksum mismatch"},
		{"bad pod JSON", []byte(`{"checksum":"sha256:00","pod":{"x":}}`), "invalid character"},
		{"unknown pod field", recordOf(t, `{"metadata":{"name":"web","namespace":"default"},"x":1}`), `pod: unknown field "x"`},
		{"other name", mutate(func(p *v1.Pod) { p.Name = "other" }), "holds pod default/other, its name says default/web"},
		{"no UID", mutate(func(p *v1.Pod) { p.UID = "" }), "metadata.uid: Required value"},
		{"static", mutate(func(p *v1.Pod) { p.Annotations[ConfigSourceAnnotationKey] = FileSource }), `must be "api"`},
		{"invalid", mutate(func(p *v1.Pod) { p.Spec.Containers[0].Image = "" }), "spec.containers[0].image: Required value"},
		{"mirror", mutate(func(p *v1.Pod) { p.Annotations[configMirrorAnnotationKey] = "x" }), "Forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := decodeRecord(tc.data, "default", "web", "node-a")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decodeRecord = %v, %v; want an error containing %q", pod != nil, err, tc.want)
			}
		})
	}
}

// recordOf builds a record around pod JSON with a valid checksum.
func recordOf(t *testing.T, podJSON string) []byte {
	t.Helper()
	data, err := json.Marshal(record{Checksum: checksum([]byte(podJSON)), Pod: json.RawMessage(podJSON)})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDecodeRecordIgnoresLayout(t *testing.T) {
	// The checksum is of the compact pod: re-indenting the file is no damage.
	data, err := encodeRecord(storedPod(t, podManifest("web", "busybox:1")))
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeRecord(compact.Bytes(), "default", "web", "node-a"); err != nil {
		t.Errorf("compacted record: %v", err)
	}
}

func TestStoreFileName(t *testing.T) {
	if got := storeFileName("default", "web.v1"); got != "default_web.v1.json" {
		t.Errorf("storeFileName = %q", got)
	}
	for _, tc := range []struct {
		file, namespace, name string
		ok                    bool
	}{
		{"default_web.json", "default", "web", true},
		{"kube-system_a.b.json", "kube-system", "a.b", true},
		{"web.json", "", "", false},
		{"default_.json", "", "", false},
		{"_web.json", "", "", false},
		{"default_web.yaml", "", "", false},
		{"default_web.json.corrupt-20240501T100000.000000000Z", "", "", false},
	} {
		ns, name, ok := parseStoreFileName(tc.file)
		if ok != tc.ok || (ok && (ns != tc.namespace || name != tc.name)) {
			t.Errorf("parseStoreFileName(%q) = %q, %q, %v; want %q, %q, %v", tc.file, ns, name, ok, tc.namespace, tc.name, tc.ok)
		}
	}
}

func TestCompareQuarantined(t *testing.T) {
	t0 := storeTime
	older := quarantine.Name("/s/default_web.json", t0, 0)
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{older, quarantine.Name("/s/default_web.json", t0.Add(time.Nanosecond), 0), -1},
		{quarantine.Name("/s/default_web.json", t0, 2), quarantine.Name("/s/default_web.json", t0, 10), -1},
		{quarantine.Name("/s/default_web.json", t0, 1), older, 1},
		{older, older, 0},
	} {
		if got := compareQuarantined(tc.a, tc.b); got != tc.want {
			t.Errorf("compareQuarantined(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
