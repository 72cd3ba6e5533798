package volume

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func withHugePages(pod *v1.Pod, requests ...string) *v1.Pod {
	for i, r := range requests {
		l := v1.ResourceList{v1.ResourceName("hugepages-" + r): resource.MustParse(r), v1.ResourceMemory: resource.MustParse("64Mi")}
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "c" + string(rune('a'+i)),
			Resources: v1.ResourceRequirements{Requests: l, Limits: l}})
	}
	return pod
}

// The kubelet's emptyDir setupHugepages: a hugetlbfs of the page size the
// medium and the pod's requests give, once, unmounted at teardown.
func TestHugePagesEmptyDir(t *testing.T) {
	fm := &fakeMounter{mounted: map[string]int64{}}
	m := NewManager(t.TempDir(), fm, discardLogger())
	pod := withHugePages(testPod("u", emptyDirVolume("hp", v1.StorageMediumHugePages, ""),
		emptyDirVolume("hp2m", "HugePages-2Mi", "")), "2Mi")
	paths, err := m.Setup(context.Background(), pod, SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Setup(context.Background(), pod, SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"mount hugetlbfs pagesize=2Mi " + paths["hp"], "mount hugetlbfs pagesize=2Mi " + paths["hp2m"]}
	got := slices.Sorted(slices.Values(fm.calls))
	if !slices.Equal(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
	if err := m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if len(fm.mounted) != 0 {
		t.Errorf("still mounted: %v", fm.mounted)
	}
}

func TestHugePagesEmptyDirRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		reason string
	}{
		{"no request", testPod("a", emptyDirVolume("hp", v1.StorageMediumHugePages, "")),
			"medium HugePages: hugePages storage requested, but there is no resource request for huge pages"},
		{"two sizes", withHugePages(testPod("b", emptyDirVolume("hp", v1.StorageMediumHugePages, "")), "2Mi", "1Gi"),
			"medium HugePages can't be used if container requests multiple huge page sizes"},
		{"other size", withHugePages(testPod("c", emptyDirVolume("hp", "HugePages-1Gi", "")), "2Mi"),
			"medium HugePages-1Gi: hugePages storage requested, but there is no resource request for huge pages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fm := &fakeMounter{mounted: map[string]int64{}}
			m := NewManager(t.TempDir(), fm, discardLogger())
			_, err := m.Setup(context.Background(), tc.pod, SetupOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Setup = %v, want %q", err, tc.reason)
			}
			if len(fm.calls) != 0 {
				t.Errorf("mounted anyway: %v", fm.calls)
			}
		})
	}
}
