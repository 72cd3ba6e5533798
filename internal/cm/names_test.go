package cm

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestCgroupfsPaths(t *testing.T) {
	kubepods := KubepodsCgroup("/")
	guaranteed := podOf("1111", ctr("c", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")))
	burstable := podOf("2222", ctr("c", res("cpu", "1"), nil))
	besteffort := podOf("3333", ctr("c", nil, nil))
	for _, tt := range []struct {
		name string
		got  CgroupName
		want string
	}{
		{"root", CgroupName{}, "/"},
		{"root spelled with an empty component", CgroupName{""}, "/"},
		{"parsed root", ParseCgroupfs("/"), "/"},
		{"parsed empty", ParseCgroupfs(""), "/"},
		{"kubepods under /", kubepods, "/kubepods"},
		{"kubepods under an empty root", KubepodsCgroup(""), "/kubepods"},
		{"kubepods under a custom root", KubepodsCgroup("/custom/root"), "/custom/root/kubepods"},
		{"custom root with stray slashes", KubepodsCgroup("/custom//root/"), "/custom/root/kubepods"},
		{"guaranteed QoS cgroup is kubepods", QOSCgroup(kubepods, v1.PodQOSGuaranteed), "/kubepods"},
		{"burstable QoS cgroup", QOSCgroup(kubepods, v1.PodQOSBurstable), "/kubepods/burstable"},
		{"besteffort QoS cgroup", QOSCgroup(kubepods, v1.PodQOSBestEffort), "/kubepods/besteffort"},
		{"guaranteed pod", PodCgroup(kubepods, guaranteed), "/kubepods/pod1111"},
		{"burstable pod", PodCgroup(kubepods, burstable), "/kubepods/burstable/pod2222"},
		{"besteffort pod", PodCgroup(kubepods, besteffort), "/kubepods/besteffort/pod3333"},
		{"pod under a custom root", PodCgroup(KubepodsCgroup("/custom/root"), burstable), "/custom/root/kubepods/burstable/pod2222"},
		{"no way out of the mount", CgroupName{"..", "..", "etc"}, "/etc"},
	} {
		if got := tt.got.ToCgroupfs(); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestNewCgroupNameDoesNotShare(t *testing.T) {
	parent := make(CgroupName, 1, 8)
	parent[0] = "kubepods"
	a := NewCgroupName(parent, "burstable")
	b := NewCgroupName(parent, "besteffort")
	if a.ToCgroupfs() != "/kubepods/burstable" || b.ToCgroupfs() != "/kubepods/besteffort" {
		t.Errorf("siblings share storage: %q, %q", a.ToCgroupfs(), b.ToCgroupfs())
	}
	if len(parent) != 1 {
		t.Errorf("parent changed: %v", parent)
	}
}

func TestPodUIDFromCgroup(t *testing.T) {
	for _, tt := range []struct {
		base string
		uid  types.UID
		ok   bool
	}{
		{"pod6b8a1c0e-2f43-4a3b-9d55-0c8e4f1a7b21", "6b8a1c0e-2f43-4a3b-9d55-0c8e4f1a7b21", true},
		{"pod1234", "1234", true},
		{"pod", "", false},
		{"burstable", "", false},
		{"besteffort", "", false},
		{"kubepods", "", false},
		{"", "", false},
	} {
		uid, ok := PodUIDFromCgroup(tt.base)
		if uid != tt.uid || ok != tt.ok {
			t.Errorf("PodUIDFromCgroup(%q) = %q, %v; want %q, %v", tt.base, uid, ok, tt.uid, tt.ok)
		}
	}
	// The round trip a cgroup listing relies on.
	pod := podOf("abcd-ef", ctr("c", nil, nil))
	path := PodCgroup(KubepodsCgroup("/"), pod)
	if uid, ok := PodUIDFromCgroup(path[len(path)-1]); !ok || uid != pod.UID {
		t.Errorf("round trip of %q: %q, %v", path.ToCgroupfs(), uid, ok)
	}
}
