package podsource

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func sourcePod(namespace, name, uid, source string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, UID: types.UID(uid),
		Annotations: map[string]string{ConfigSourceAnnotationKey: source},
	}}
}

func TestMergeSnapshots(t *testing.T) {
	static := Snapshot{
		Pods: []*v1.Pod{
			sourcePod("default", "b-node", "s1", FileSource),
			sourcePod("kube-system", "dns-node", "s2", FileSource),
		},
		Errors: []ManifestError{{Path: "/m/broken.yaml", Namespace: "default", Name: "broken-node", Err: errors.New("kind: Required value")}},
	}
	api := Snapshot{
		Pods: []*v1.Pod{
			sourcePod("default", "a", "a1", ApiserverSource),
			sourcePod("default", "b-node", "a2", ApiserverSource), // the name a static pod took
			sourcePod("zeta", "z", "a3", ApiserverSource),
		},
		Errors: []ManifestError{{Path: "/s/default_q.json", Namespace: "default", Name: "q", Err: errors.New("checksum mismatch")}},
	}
	got := mergeSnapshots(static, api, "/s")
	var uids []string
	for _, p := range got.Pods {
		uids = append(uids, p.Namespace+"/"+p.Name+"="+string(p.UID))
	}
	if want := "default/a=a1 default/b-node=s1 kube-system/dns-node=s2 zeta/z=a3"; strings.Join(uids, " ") != want {
		t.Errorf("pods %v, want %s", uids, want)
	}
	var errs []string
	for _, e := range got.Errors {
		errs = append(errs, e.Error())
	}
	want := []string{
		"/m/broken.yaml: kind: Required value",
		"/s/default_q.json: checksum mismatch",
		`/s/default_b-node.json: metadata.name: Duplicate value: "b-node": a static pod default/b-node runs from the manifest directory; delete this pod or rename one of them`,
	}
	if strings.Join(errs, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(want, "\n"))
	}
	if e := got.Errors[2]; e.Namespace != "default" || e.Name != "b-node" {
		t.Errorf("the shadowed pod's error names %s/%s", e.Namespace, e.Name)
	}
	// The receiver owns the result.
	got.Pods[0].Name = "changed"
	if api.Pods[0].Name != "a" {
		t.Error("the merge shares pods with its inputs")
	}
}

func TestMerger(t *testing.T) {
	static := func(uids ...string) Snapshot {
		var s Snapshot
		for _, u := range uids {
			s.Pods = append(s.Pods, sourcePod("default", "s-"+u, u, FileSource))
		}
		return s
	}
	api := func(uids ...string) Snapshot {
		var s Snapshot
		for _, u := range uids {
			s.Pods = append(s.Pods, sourcePod("default", "a-"+u, u, ApiserverSource))
		}
		return s
	}
	type step struct {
		static bool // else the API source
		snap   Snapshot
		want   string // UIDs of the merge sent, "-" for none
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"static first waits for the store", []step{
			{true, static("1"), "-"},
			{true, static("1", "2"), "-"},
			{false, api(), "1 2"},
		}},
		{"store first waits for the manifests", []step{
			{false, api("9"), "-"},
			{true, static(), "9"},
		}},
		{"empty sources still make a first snapshot", []step{
			{true, static(), "-"},
			{false, api(), ""},
		}},
		{"a change is sent, a repeat is not", []step{
			{true, static("1"), "-"},
			{false, api("9"), "9 1"}, // sorted by name: a-9 before s-1
			{false, api("9"), "-"},
			{true, static("1"), "-"},
			{false, api("8", "9"), "8 9 1"},
			{true, static(), "8 9"},
			{false, api(), ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := merger{storeDir: "/s"}
			for i, s := range tc.steps {
				var (
					got     Snapshot
					changed bool
				)
				if s.static {
					got, changed = st.setStatic(s.snap)
				} else {
					got, changed = st.setAPI(s.snap)
				}
				desc := "-"
				if changed {
					var uids []string
					for _, p := range got.Pods {
						uids = append(uids, string(p.UID))
					}
					desc = strings.Join(uids, " ")
				}
				if desc != s.want {
					t.Errorf("step %d: sent %q, want %q", i, desc, s.want)
				}
			}
		})
	}
}

func TestMergeRun(t *testing.T) {
	m := NewMerge("/s", nil)
	static, api, out := make(chan Snapshot), make(chan Snapshot), make(chan Snapshot, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx, static, api, out)
	}()
	defer func() {
		cancel()
		<-done
	}()

	// Before the manifests are read, IsStatic cannot answer.
	short, cancelShort := context.WithCancel(ctx)
	cancelShort()
	if _, err := m.IsStatic(short, "default", "web-node"); err == nil {
		t.Error("IsStatic answered before the manifest directory was read")
	}
	api <- Snapshot{Pods: []*v1.Pod{sourcePod("default", "web-node", "a1", ApiserverSource)}}
	static <- Snapshot{Pods: []*v1.Pod{sourcePod("default", "web-node", "s1", FileSource)}}
	var snap Snapshot
	select {
	case snap = <-out:
	case <-time.After(10 * time.Second): // only so a broken Run cannot hang the test
		t.Fatal("no merged snapshot")
	}
	if len(snap.Pods) != 1 || snap.Pods[0].UID != "s1" || len(snap.Errors) != 1 {
		t.Errorf("merged %+v; want the static pod and an error for the API pod", snap)
	}
	for name, want := range map[string]bool{"web-node": true, "web": false} {
		if got, err := m.IsStatic(ctx, "default", name); err != nil || got != want {
			t.Errorf("IsStatic(default/%s) = %v, %v; want %v", name, got, err, want)
		}
	}
}
