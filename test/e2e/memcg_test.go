package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// memcgUnified reports a unified cgroup v2 host. A hybrid host (cgroup v1
// controllers, cgroup2 at /sys/fs/cgroup/unified) is v1, for the kubelet
// and for berth.
func memcgUnified(t *testing.T) bool {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		t.Fatal(err)
	}
	return st.Type == unix.CGROUP2_SUPER_MAGIC
}

// memcgFile reads a cgroup file of a container or pod cgroup: on v1 from
// the controller's hierarchy, on v2 from the unified tree.
func memcgFile(t *testing.T, controller, cgroup, file string) (string, error) {
	t.Helper()
	dir := filepath.Join("/sys/fs/cgroup", controller, cgroup)
	if memcgUnified(t) {
		dir = filepath.Join("/sys/fs/cgroup", cgroup)
	}
	data, err := os.ReadFile(filepath.Join(dir, file))
	return strings.TrimSpace(string(data)), err
}

func memcgContainerCgroup(t *testing.T, pod *v1.Pod, name string) string {
	t.Helper()
	podCgroup := pod.Annotations["berth.dev/pod-cgroup"]
	if podCgroup == "" {
		t.Fatalf("%s has no pod-cgroup annotation", pod.Name)
	}
	return podCgroup + "/" + containerID(t, pod, name)
}

// The kubelet's NoSwap, the default, and memory.oom.group, on the cgroup
// this machine has. On v2 every container gets memory.swap.max 0 (where
// swap accounting exists) and memory.oom.group 1, which berth did not
// write before. On v1 with swap accounting (memory.memsw.*), a container's
// memory+swap limit equals its memory limit, so it cannot swap, and one
// without a memory limit stays unlimited: containerd's CRI plugin makes
// memsw equal to the memory limit by itself when it is given no swap
// limit, so on v1 this checks that the value berth now sends agrees.
func TestMemcgNoSwapAndOOMGroup(t *testing.T) {
	n := startNode(t)
	sleep := `["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]`
	n.writeManifest("mem.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: memcg}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: limited
    image: %[1]s
    command: %[2]s
    resources: {limits: {memory: 64Mi}, requests: {memory: 32Mi}}
  - name: unlimited
    image: %[1]s
    command: %[2]s
`, busybox, sleep))
	pod := n.waitRunning("memcg", time.Minute)
	limited := memcgContainerCgroup(t, pod, "limited")
	unlimited := memcgContainerCgroup(t, pod, "unlimited")

	if !memcgUnified(t) {
		if _, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); err != nil {
			// The test cannot check NoSwap here: it fails rather than pass
			// unchecked (a host for berth's CI has swap accounting).
			t.Fatalf("cgroup v1 without swap accounting (%v): nothing to check NoSwap against", err)
		}
		for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
			if got, err := memcgFile(t, "memory", limited, f); err != nil || got != strconv.Itoa(64<<20) {
				t.Errorf("limited container: %s = %q (%v), want %d", f, got, err, 64<<20)
			}
		}
		if got, err := memcgFile(t, "memory", unlimited, "memory.memsw.limit_in_bytes"); err != nil || got != "9223372036854771712" {
			t.Errorf("unlimited container: memory.memsw.limit_in_bytes = %q (%v), want unlimited", got, err)
		}
		return
	}
	for _, c := range []string{limited, unlimited} {
		if got, err := memcgFile(t, "memory", c, "memory.oom.group"); err != nil || got != "1" {
			t.Errorf("%s: memory.oom.group = %q (%v), want 1", c, got, err)
		}
		if got, err := memcgFile(t, "memory", c, "memory.swap.max"); err == nil && got != "0" {
			t.Errorf("%s: memory.swap.max = %q, want 0", c, got)
		}
	}
}

// Settings the kubelet refuses on a cgroup v1 host (this hybrid machine
// included) stop berth's start-up, naming the field and the reason:
// singleProcessOOMKill=false (v1 has no memory.oom.group) and LimitedSwap.
func TestMemcgV1RefusesV2OnlySettings(t *testing.T) {
	if memcgUnified(t) {
		t.Fatal("a cgroup v2 host accepts both settings: this test needs the cgroup v1 host berth's CI runs on")
	}
	for _, tc := range []struct{ setting, want string }{
		{"singleProcessOOMKill: false", "singleProcessOOMKill: false: must not be explicitly set to false when using cgroup v1"},
		{"failSwapOn: false\nmemorySwap: {swapBehavior: LimitedSwap}", "memorySwap.swapBehavior: LimitedSwap: is only supported with cgroup v2"},
	} {
		cfg := writeConfig(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+tc.setting+"\n")
		// Long enough for a refusal; a berth that starts instead is cut off.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cgroupRoot := fmt.Sprintf("/berth-e2e-%d", time.Now().UnixNano())
		t.Cleanup(func() { removeCgroups(t, cgroupRoot) })
		root := t.TempDir()
		out, err := exec.CommandContext(ctx, filepath.Join(bins, "berth"), "run", "--config", cfg,
			"--root-dir", root, "--read-only-port", "0", "--cgroup-root", cgroupRoot,
			"--pod-manifest-path", filepath.Join(root, "manifests"), "--pod-logs-dir", filepath.Join(root, "logs"),
			"--cni-bridge", fmt.Sprintf("bm%08x", uint32(time.Now().UnixNano())), "--pod-cidr", "10.214.77.0/24",
			"--pause-binary", filepath.Join(bins, "berth-pause")).CombinedOutput()
		cancel()
		killLeftovers(t, root)
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: berth must refuse to start with %q: %v\n%s", tc.setting, tc.want, err, memcgTail(out))
		}
	}
}

// failSwapOn, true by default, stops berth on a host with swap on, as it
// stops the kubelet. The host's swap is left alone: berth runs in a mount
// namespace of its own where /proc/swaps lists a swap file.
func TestMemcgFailSwapOn(t *testing.T) {
	swaps := filepath.Join(t.TempDir(), "swaps")
	if err := os.WriteFile(swaps, []byte("Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1048572 0 -2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cgroupRoot := fmt.Sprintf("/berth-e2e-%d", time.Now().UnixNano())
	t.Cleanup(func() { removeCgroups(t, cgroupRoot) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := `mount --bind "$0" /proc/swaps && exec "$@"`
	out, err := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "sh", "-c", script, swaps,
		filepath.Join(bins, "berth"), "run",
		"--root-dir", root, "--read-only-port", "0", "--cgroup-root", cgroupRoot,
		"--pod-manifest-path", filepath.Join(root, "manifests"), "--pod-logs-dir", filepath.Join(root, "logs"),
		"--cni-bridge", fmt.Sprintf("bm%08x", uint32(time.Now().UnixNano())), "--pod-cidr", "10.214.78.0/24",
		"--pause-binary", filepath.Join(bins, "berth-pause")).CombinedOutput()
	killLeftovers(t, root)
	want := "failSwapOn: true: running with swap on is not supported; disable swap or set failSwapOn to false"
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("berth must refuse to start with swap on: %v\n%s", err, memcgTail(out))
	}
}

func memcgTail(out []byte) string {
	if len(out) > 3000 {
		out = out[len(out)-3000:]
	}
	return string(out)
}

// memcgHugePages pre-allocates pages 2Mi pages for the test, and gives the
// host's own count back at the end. It fails the test where the kernel has
// no 2Mi pages or cannot find the memory: nothing would be checked.
func memcgHugePages(t *testing.T, pages int) {
	t.Helper()
	file := "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no 2Mi huge pages on this kernel: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(file, old, 0o644); err != nil {
			t.Errorf("give the huge pages back: %v", err)
		}
	})
	have, _ := strconv.Atoi(strings.TrimSpace(string(old)))
	if err := os.WriteFile(file, []byte(strconv.Itoa(have+pages)), 0o644); err != nil {
		t.Fatalf("allocate %d huge pages: %v", pages, err)
	}
	got, _ := os.ReadFile(file)
	if n, _ := strconv.Atoi(strings.TrimSpace(string(got))); n < have+pages {
		t.Fatalf("the kernel found only %d of %d huge pages", n, have+pages)
	}
}

// A HugePages emptyDir is mounted as a hugetlbfs of the pod's page size,
// as the kubelet mounts it; the pod's hugetlb limits follow the kubelet's
// where the host has the hugetlb controller. One that no page size fits is
// refused at once, with the kubelet's reason, instead of failing to mount
// for ever.
func TestMemcgHugePagesEmptyDir(t *testing.T) {
	memcgHugePages(t, 2)
	n := startNode(t)
	sleep := `["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]`
	n.writeManifest("hp.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: hugepages}
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - {name: hp, emptyDir: {medium: HugePages}}
  - {name: hp2m, emptyDir: {medium: HugePages-2Mi}}
  containers:
  - name: c
    image: %[1]s
    command: %[2]s
    volumeMounts: [{name: hp, mountPath: /hp}, {name: hp2m, mountPath: /hp2m}]
    resources:
      limits: {memory: 64Mi, hugepages-2Mi: 2Mi}
      requests: {memory: 64Mi, hugepages-2Mi: 2Mi}
`, busybox, sleep))
	pod := n.waitRunning("hugepages", 90*time.Second)
	mounts := n.exec(pod, "c", "cat", "/proc/mounts")
	for _, dir := range []string{"/hp", "/hp2m"} {
		found := false
		for _, line := range strings.Split(mounts, "\n") {
			f := strings.Fields(line)
			if len(f) >= 4 && f[1] == dir {
				found = true
				if f[2] != "hugetlbfs" || !strings.Contains(f[3], "pagesize=2M") {
					t.Errorf("%s is mounted as %s (%s), want hugetlbfs with pagesize=2M", dir, f[2], f[3])
				}
			}
		}
		if !found {
			t.Errorf("%s is not a mount in the container:\n%s", dir, mounts)
		}
	}
	memcgCheckHugetlb(t, pod)

	out, err := n.apply(fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: hugepages-none}
spec:
  volumes: [{name: hp, emptyDir: {medium: HugePages}}]
  containers:
  - {name: c, image: %s, volumeMounts: [{name: hp, mountPath: /hp}]}
`, busybox))
	want := "medium HugePages: hugePages storage requested, but there is no resource request for huge pages"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a huge page emptyDir without a huge page request: apply = %v\n%s; want a refusal with %q", err, out, want)
	}

	// The pod's hugetlbfs goes with it.
	hostDir := filepath.Join(n.root, "pods", string(pod.UID))
	n.removeManifest("hp.yaml")
	waitFor(t, time.Minute, "the pod's volumes to be torn down", func() (bool, string) {
		_, err := os.Stat(hostDir)
		return os.IsNotExist(err), fmt.Sprint(err)
	})
}

// memcgCheckHugetlb checks the pod cgroup's and the container's hugetlb
// limits where this host has the hugetlb controller: the kubelet writes
// none where it does not (a v1 host without a hugetlb hierarchy, as this
// hybrid machine, whose hugetlb sits unused on the cgroup2 side).
func memcgCheckHugetlb(t *testing.T, pod *v1.Pod) {
	t.Helper()
	suffix := "max"
	if !memcgUnified(t) {
		if _, err := os.Stat("/sys/fs/cgroup/hugetlb"); err != nil {
			t.Logf("no cgroup v1 hugetlb hierarchy: hugetlb limits not written, as by the kubelet")
			return
		}
		suffix = "limit_in_bytes"
	}
	podCgroup := pod.Annotations["berth.dev/pod-cgroup"]
	got, err := memcgFile(t, "hugetlb", podCgroup, "hugetlb.2MB."+suffix)
	if os.IsNotExist(err) && memcgUnified(t) {
		t.Logf("no hugetlb controller in the unified tree: hugetlb limits not written, as by the kubelet")
		return
	}
	if err != nil || got != strconv.Itoa(2<<20) {
		t.Errorf("pod cgroup: hugetlb.2MB.%s = %q (%v), want %d", suffix, got, err, 2<<20)
	}
	if got, err := memcgFile(t, "hugetlb", podCgroup, "hugetlb.1GB."+suffix); err == nil && got != "0" {
		t.Errorf("pod cgroup: hugetlb.1GB.%s = %q, want 0", suffix, got)
	}
	c := memcgContainerCgroup(t, pod, "c")
	if got, err := memcgFile(t, "hugetlb", c, "hugetlb.2MB."+suffix); err != nil || got != strconv.Itoa(2<<20) {
		t.Errorf("container: hugetlb.2MB.%s = %q (%v), want %d", suffix, got, err, 2<<20)
	}
}
