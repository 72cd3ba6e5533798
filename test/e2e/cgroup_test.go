package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

const gib = int64(1) << 30

// The seed's worked example on this machine (its cpu requests halved, so
// that the pods fit in two cpus): a Guaranteed, a Burstable and a
// BestEffort pod with qosReserved memory=100%. Every value in kubepods,
// the QoS cgroups, the pod cgroups and the container cgroups is read from
// the real /sys/fs/cgroup and compared with the formulas applied to this
// machine's capacity. Deleting the Guaranteed pod raises the burstable and
// besteffort memory limits.
func TestQOSCgroupHierarchy(t *testing.T) {
	cfg := writeConfig(t, `
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
qosReserved: {memory: 100%}
podPidsLimit: 1000
`)
	n := startNode(t, "--config", cfg)
	sleep := `["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]`
	n.writeManifest("guaranteed.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: pod-guaranteed-1}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: container3
    image: %[1]s
    command: %[2]s
    resources: {limits: {cpu: 500m, memory: 1Gi}, requests: {cpu: 500m, memory: 1Gi}}
`, busybox, sleep))
	n.writeManifest("burstable.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: pod-burstable-1}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: container1
    image: %[1]s
    command: %[2]s
    resources: {limits: {cpu: 1, memory: 1Gi}, requests: {cpu: 500m, memory: 1Gi}}
  - name: container2
    image: %[1]s
    command: %[2]s
    resources: {limits: {cpu: 2, memory: 2Gi}, requests: {cpu: 500m, memory: 1Gi}}
`, busybox, sleep))
	n.writeManifest("besteffort.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: pod-besteffort-1}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: container4
    image: %[1]s
    command: %[2]s
`, busybox, sleep))
	g := n.waitRunning("pod-guaranteed-1", time.Minute)
	b := n.waitRunning("pod-burstable-1", time.Minute)
	be := n.waitRunning("pod-besteffort-1", time.Minute)
	for pod, class := range map[*v1.Pod]v1.PodQOSClass{g: v1.PodQOSGuaranteed, b: v1.PodQOSBurstable, be: v1.PodQOSBestEffort} {
		if pod.Status.QOSClass != class {
			t.Errorf("%s: qosClass %s, want %s", pod.Name, pod.Status.QOSClass, class)
		}
	}

	// This machine, with no reservations: the cgroups are sized from
	// capacity (the eviction threshold is eviction's margin, not the kernel's).
	alloc := memTotal(t)
	kubepods := n.cgroupRoot + "/kubepods"
	cg := cgroupReader{t: t}
	cg.want("cpu", kubepods, "cpu.shares", int64(runtime.NumCPU())*1024)
	cg.want("memory", kubepods, "memory.limit_in_bytes", pageDown(alloc))
	cg.want("cpu", kubepods+"/burstable", "cpu.shares", 1024) // container1 + container2 requests
	cg.want("memory", kubepods+"/burstable", "memory.limit_in_bytes", pageDown(alloc-1*gib))
	cg.want("cpu", kubepods+"/besteffort", "cpu.shares", 2)
	cg.want("memory", kubepods+"/besteffort", "memory.limit_in_bytes", pageDown(alloc-3*gib))

	gPath := kubepods + "/pod" + string(g.UID)
	bPath := kubepods + "/burstable/pod" + string(b.UID)
	bePath := kubepods + "/besteffort/pod" + string(be.UID)
	for pod, path := range map[*v1.Pod]string{g: gPath, b: bPath, be: bePath} {
		if got := pod.Annotations["berth.dev/pod-cgroup"]; got != path {
			t.Errorf("%s: the pod-cgroup annotation is %q, want %q", pod.Name, got, path)
		}
	}
	cg.want("cpu", gPath, "cpu.shares", 512)
	cg.want("cpu", gPath, "cpu.cfs_quota_us", 50000)
	cg.want("cpu", gPath, "cpu.cfs_period_us", 100000)
	cg.want("memory", gPath, "memory.limit_in_bytes", 1*gib)
	cg.want("cpu", bPath, "cpu.shares", 1024)
	cg.want("cpu", bPath, "cpu.cfs_quota_us", 300000)
	cg.want("memory", bPath, "memory.limit_in_bytes", 3*gib)
	cg.want("cpu", bePath, "cpu.shares", 2)
	cg.want("cpu", bePath, "cpu.cfs_quota_us", -1)

	// Containers sit in their pod's cgroup, with their own values.
	for _, c := range []struct {
		pod           *v1.Pod
		path, name    string
		shares, quota int64
		memory        int64
	}{
		{g, gPath, "container3", 512, 50000, 1 * gib},
		{b, bPath, "container1", 512, 100000, 1 * gib},
		{b, bPath, "container2", 512, 200000, 2 * gib},
		{be, bePath, "container4", 2, -1, 0},
	} {
		dir := c.path + "/" + containerID(t, c.pod, c.name)
		cg.want("cpu", dir, "cpu.shares", c.shares)
		cg.want("cpu", dir, "cpu.cfs_quota_us", c.quota)
		if c.memory > 0 {
			cg.want("memory", dir, "memory.limit_in_bytes", c.memory)
		}
	}

	cg.want("pids", gPath, "pids.max", 1000)

	// A restart of berth finds the tree as it left it and changes nothing
	// (the QoS limits are not loosened while the pods are unknown); the
	// cgroup of a pod that is gone, left behind meanwhile, is removed.
	n.stop()
	stale := kubepods + "/besteffort/pod0a1b2c3d-0000-4000-8000-000000000000"
	for _, controller := range []string{"cpu", "memory", "pids"} {
		if err := os.MkdirAll(filepath.Join("/sys/fs/cgroup", controller, stale), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.start()
	waitFor(t, 30*time.Second, "the stale pod cgroup to be removed", func() (bool, string) {
		_, err := os.Stat(filepath.Join("/sys/fs/cgroup/cpu", stale))
		return os.IsNotExist(err), fmt.Sprint(err)
	})
	cg.want("memory", kubepods+"/burstable", "memory.limit_in_bytes", pageDown(alloc-1*gib))
	cg.want("memory", kubepods+"/besteffort", "memory.limit_in_bytes", pageDown(alloc-3*gib))
	cg.want("cpu", bPath, "cpu.shares", 1024)
	cg.want("memory", gPath, "memory.limit_in_bytes", 1*gib)

	// The Guaranteed pod leaves: its cgroup goes and the room it reserved
	// returns to the lower classes.
	n.removeManifest("guaranteed.yaml")
	waitFor(t, time.Minute, "the guaranteed pod's cgroup to be removed", func() (bool, string) {
		_, err := os.Stat(filepath.Join("/sys/fs/cgroup/cpu", gPath))
		return os.IsNotExist(err), fmt.Sprint(err)
	})
	waitFor(t, 30*time.Second, "the QoS memory limits to rise", func() (bool, string) {
		bl, el := cg.read("memory", kubepods+"/burstable", "memory.limit_in_bytes"), cg.read("memory", kubepods+"/besteffort", "memory.limit_in_bytes")
		return bl == pageDown(alloc) && el == pageDown(alloc-2*gib), fmt.Sprintf("burstable %d, besteffort %d", bl, el)
	})
}

type cgroupReader struct{ t *testing.T }

func (c cgroupReader) read(controller, path, file string) int64 {
	c.t.Helper()
	data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, path, file))
	if err != nil {
		c.t.Fatalf("read cgroup: %v", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		c.t.Fatalf("%s/%s: %q: %v", path, file, data, err)
	}
	return v
}

func (c cgroupReader) want(controller, path, file string, want int64) {
	c.t.Helper()
	if got := c.read(controller, path, file); got != want {
		c.t.Errorf("%s/%s = %d, want %d", path, file, got, want)
	}
}

func memTotal(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}

// pageDown is what cgroup v1 stores for a memory limit: the value rounded
// down to whole pages.
func pageDown(v int64) int64 {
	page := int64(os.Getpagesize())
	return v / page * page
}
