package userns

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func userPod(uid types.UID, hostUsers *bool) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{HostUsers: hostUsers}}
	p.UID = uid
	return p
}

func newManager(t *testing.T, dir, unsupported string) (*Manager, []error) {
	t.Helper()
	a, err := NewAllocator(65536, 65536*4, 65536, 4)
	if err != nil {
		t.Fatal(err)
	}
	return Open(dir, a, unsupported, slog.New(slog.DiscardHandler))
}

// TestManagerRestart allocates, restarts over the same directory and
// checks that every pod keeps its range and none is handed out twice.
func TestManagerRestart(t *testing.T) {
	dir := t.TempDir()
	m, problems := newManager(t, dir, "")
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	a, err := m.PodUserNamespace(userPod("a", ptr.To(false)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.PodUserNamespace(userPod("b", ptr.To(false)))
	if err != nil {
		t.Fatal(err)
	}
	if a.Mode != runtimeapi.NamespaceMode_POD || a.Uids[0].HostId == b.Uids[0].HostId || a.Uids[0].HostId == 0 {
		t.Fatalf("a = %v, b = %v: want two disjoint pod ranges", a, b)
	}
	node, err := m.PodUserNamespace(userPod("c", nil))
	if err != nil || node.Mode != runtimeapi.NamespaceMode_NODE {
		t.Fatalf("a pod of the host's users: %v, %v", node, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "c", MappingsFile)); !os.IsNotExist(err) {
		t.Errorf("a pod of the host's users got a mappings file: %v", err)
	}

	m2, problems := newManager(t, dir, "")
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	for uid, want := range map[types.UID]uint32{"a": a.Uids[0].HostId, "b": b.Uids[0].HostId} {
		if got, ok := m2.Mapping(uid); !ok || got.HostID != want {
			t.Errorf("after restart %s holds %+v (%v), want host ID %d", uid, got, ok, want)
		}
	}
	again, err := m2.PodUserNamespace(userPod("a", ptr.To(false)))
	if err != nil || again.Uids[0].HostId != a.Uids[0].HostId {
		t.Errorf("a after restart: %v, %v", again, err)
	}
	d, err := m2.PodUserNamespace(userPod("d", ptr.To(false)))
	if err != nil {
		t.Fatal(err)
	}
	if h := d.Uids[0].HostId; h == a.Uids[0].HostId || h == b.Uids[0].HostId {
		t.Errorf("a new pod after restart got a held range: %d", h)
	}

	released := m2.Housekeep(func(uid types.UID) bool { return uid != "b" })
	if len(released) != 1 || released[0] != "b" {
		t.Errorf("housekeeping released %v, want [b]", released)
	}
	if _, err := os.Stat(filepath.Join(dir, "b", MappingsFile)); !os.IsNotExist(err) {
		t.Errorf("b's mappings file is left: %v", err)
	}
	m2.Release("a")
	if _, ok := m2.Mapping("a"); ok {
		t.Error("a still holds a range after its release")
	}
}

func TestManagerBadFileAndNoSupport(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bad"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad", MappingsFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, problems := newManager(t, dir, "")
	if len(problems) != 1 {
		t.Fatalf("problems = %v, want the bad file", problems)
	}
	if _, err := m.PodUserNamespace(userPod("bad", ptr.To(false))); err == nil {
		t.Error("a pod with a corrupt mappings file got a range")
	}
	if _, err := m.PodUserNamespace(userPod("good", ptr.To(false))); err != nil {
		t.Errorf("another pod is harmed by the bad file: %v", err)
	}

	none, _ := newManager(t, t.TempDir(), "no support")
	if _, err := none.PodUserNamespace(userPod("x", ptr.To(false))); err == nil {
		t.Error("a range was given on a runtime without support")
	}
}

func TestHandlerSupport(t *testing.T) {
	handler := func(name string, userns bool) *runtimeapi.RuntimeHandler {
		return &runtimeapi.RuntimeHandler{Name: name, Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: userns}}
	}
	for _, tc := range []struct {
		name     string
		handlers []*runtimeapi.RuntimeHandler
		ok       bool
	}{
		{"old runtime: no handlers", nil, false},
		{"default handler supports", []*runtimeapi.RuntimeHandler{handler("", true), handler("runc", true)}, true},
		{"default handler lacks", []*runtimeapi.RuntimeHandler{handler("", false), handler("crun", true)}, false},
		{"no default handler", []*runtimeapi.RuntimeHandler{handler("runc", true)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := HandlerSupport(&runtimeapi.StatusResponse{RuntimeHandlers: tc.handlers}, "")
			if (why == "") != tc.ok {
				t.Errorf("why = %q, want supported %v", why, tc.ok)
			}
		})
	}
}
