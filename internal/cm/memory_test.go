package cm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func boolPtr(b bool) *bool { return &b }

// The kubelet's start-up checks (validateKubeletOSConfiguration,
// NewContainerManager, the LimitedSwap check of server.go) and its
// singleProcessOOMKill default (NewMainKubelet).
func TestResolveMemoryPolicy(t *testing.T) {
	v1Host := MemoryHost{}
	v2Host := MemoryHost{CgroupV2: true}
	swapHost := MemoryHost{CgroupV2: true, SwapOn: true}
	for _, tc := range []struct {
		name       string
		s          MemorySettings
		h          MemoryHost
		wantErr    string
		wantSingle bool
		wantSwap   string
	}{
		{"v1 defaults", MemorySettings{FailSwapOn: true}, v1Host, "", true, NoSwap},
		{"v1 singleProcessOOMKill true", MemorySettings{SingleProcessOOMKill: boolPtr(true)}, v1Host, "", true, NoSwap},
		{"v1 singleProcessOOMKill false", MemorySettings{SingleProcessOOMKill: boolPtr(false)}, v1Host,
			"singleProcessOOMKill: false: must not be explicitly set to false when using cgroup v1, which has no memory.oom.group", false, ""},
		{"v1 LimitedSwap", MemorySettings{SwapBehavior: LimitedSwap}, v1Host,
			"memorySwap.swapBehavior: LimitedSwap: is only supported with cgroup v2", false, ""},
		{"v2 defaults", MemorySettings{FailSwapOn: true}, v2Host, "", false, NoSwap},
		{"v2 singleProcessOOMKill true", MemorySettings{SingleProcessOOMKill: boolPtr(true)}, v2Host, "", true, NoSwap},
		{"v2 singleProcessOOMKill false", MemorySettings{SingleProcessOOMKill: boolPtr(false)}, v2Host, "", false, NoSwap},
		{"v2 LimitedSwap", MemorySettings{SwapBehavior: LimitedSwap}, v2Host, "", false, LimitedSwap},
		{"swap on, failSwapOn", MemorySettings{FailSwapOn: true}, swapHost,
			"failSwapOn: true: running with swap on is not supported; disable swap or set failSwapOn to false", false, ""},
		{"swap on, failSwapOn false", MemorySettings{SwapBehavior: LimitedSwap}, swapHost, "", false, LimitedSwap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ResolveMemoryPolicy(tc.s, tc.h)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.SingleProcessOOMKill != tc.wantSingle || p.SwapBehavior != tc.wantSwap {
				t.Errorf("single = %v, swap = %s; want %v, %s", p.SingleProcessOOMKill, p.SwapBehavior, tc.wantSingle, tc.wantSwap)
			}
		})
	}
}

// The kubelet's calcSwapForBurstablePods, on the node of its
// TestGenerateLinuxContainerResourcesWithSwap (40Gi memory, 5Gi swap).
func TestSwapForBurstable(t *testing.T) {
	const mem, swap = int64(40) << 30, int64(5) << 30
	for _, tc := range []struct {
		request, memory, swap, want int64
		wantErr                     bool
	}{
		{1 << 30, mem, swap, 128 << 20, false},
		{4 << 30, mem, swap, 512 << 20, false},
		{0, mem, swap, 0, false},
		{333, mem, swap, 41, false}, // 41.625 truncated
		{mem, mem, swap, swap, false},
		{mem + 1, mem, swap, 0, true},
		{1, 0, swap, 0, true},
	} {
		got, err := SwapForBurstable(tc.request, tc.memory, tc.swap)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("SwapForBurstable(%d, %d, %d) = %d, %v; want %d, error %v", tc.request, tc.memory, tc.swap, got, err, tc.want, tc.wantErr)
		}
	}
}

// The kubelet's HugePageUnitSizeFromByteSize cases.
func TestHugePageUnitSize(t *testing.T) {
	for size, want := range map[int64]string{1024: "1KB", 2 << 20: "2MB", 1 << 30: "1GB", 64 << 10: "64KB", 32 << 20: "32MB", 16 << 30: "16GB", 1 << 40: "1TB", 1 << 50: "1PB"} {
		if got, err := HugePageUnitSize(size); err != nil || got != want {
			t.Errorf("HugePageUnitSize(%d) = %q, %v; want %q", size, got, err, want)
		}
	}
	for _, bad := range []int64{0, -2, 1023 * 1024 * 3} {
		if got, err := HugePageUnitSize(bad); err == nil {
			t.Errorf("HugePageUnitSize(%d) = %q, want an error", bad, got)
		}
	}
}

func TestReadMemoryHost(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := HostMemoryFiles{
		Swaps:       write("swaps", "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1048572 0 -2\n"),
		Meminfo:     write("meminfo", "MemTotal:       1024 kB\nSwapTotal:       2048 kB\n"),
		Hugepages:   filepath.Join(dir, "hugepages"),
		SwapControl: write("memory.swap.max", "max\n"),
	}
	write("hugepages/hugepages-2048kB/nr_hugepages", "0\n")
	write("hugepages/hugepages-1048576kB/nr_hugepages", "0\n")
	h, err := ReadMemoryHost(files, true)
	if err != nil {
		t.Fatal(err)
	}
	want := MemoryHost{CgroupV2: true, SwapOn: true, SwapController: true, MemoryCapacity: 1 << 20, SwapCapacity: 2 << 20,
		HugePageSizes: []int64{2 << 20, 1 << 30}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("ReadMemoryHost = %+v, want %+v", h, want)
	}

	files.Swaps = write("noswaps", "Filename\tType\tSize\tUsed\tPriority\n")
	files.SwapControl = filepath.Join(dir, "absent")
	files.Hugepages = filepath.Join(dir, "absent")
	h, err = ReadMemoryHost(files, false)
	if err != nil {
		t.Fatal(err)
	}
	if h.SwapOn || h.SwapController || h.HugePageSizes != nil {
		t.Errorf("ReadMemoryHost without swap or huge pages = %+v", h)
	}

	files.Meminfo = write("badmeminfo", "MemTotal: 1 kB\n")
	if _, err := ReadMemoryHost(files, false); err == nil || !strings.Contains(err.Error(), "no SwapTotal line") {
		t.Errorf("meminfo without SwapTotal: err = %v", err)
	}
}

// The kubelet's HugePageLimits, and where the pod, kubepods and QoS cgroups
// get theirs (ResourceConfigForPod, getCgroupConfig, setHugePagesUnbounded).
func TestHugePageLimitsOfCgroups(t *testing.T) {
	q := resource.MustParse
	list := v1.ResourceList{"hugepages-2Mi": q("4Mi"), "hugepages-1Gi": q("2Gi"), v1.ResourceMemory: q("1Gi"), "hugepages-x": q("1")}
	want := map[int64]int64{2 << 20: 4 << 20, 1 << 30: 2 << 30}
	if got := HugePageLimits(list); !reflect.DeepEqual(got, want) {
		t.Errorf("HugePageLimits = %v, want %v", got, want)
	}

	c := func(name string, l v1.ResourceList) v1.Container {
		return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: l, Limits: l}}
	}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{
		c("a", v1.ResourceList{"hugepages-2Mi": q("4Mi"), v1.ResourceMemory: q("64Mi")}),
		c("b", v1.ResourceList{"hugepages-2Mi": q("2Mi"), v1.ResourceCPU: q("100m")}),
	}}}
	if got := PodResourceConfig(pod, -1).HugePageLimit; !reflect.DeepEqual(got, map[int64]int64{2 << 20: 6 << 20}) {
		t.Errorf("pod HugePageLimit = %v, want 6Mi of 2Mi pages", got)
	}
	if got := PodResourceConfig(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "be"}}}}, -1).HugePageLimit; got == nil || len(got) != 0 {
		t.Errorf("BestEffort pod HugePageLimit = %v, want empty (every host size 0)", got)
	}

	alloc := v1.ResourceList{v1.ResourceCPU: q("2"), v1.ResourceMemory: q("4Gi"), "hugepages-2Mi": q("8Mi"), "hugepages-1Gi": q("0")}
	for _, enforce := range []bool{true, false} {
		if got := KubepodsConfig(alloc, enforce).HugePageLimit; !reflect.DeepEqual(got, map[int64]int64{2 << 20: 8 << 20, 1 << 30: 0}) {
			t.Errorf("kubepods HugePageLimit (enforce %v) = %v", enforce, got)
		}
	}
	if got := QOSHugePageLimits([]int64{2 << 20}); !reflect.DeepEqual(got, map[int64]int64{2 << 20: 1 << 62}) {
		t.Errorf("QOSHugePageLimits = %v", got)
	}
}
