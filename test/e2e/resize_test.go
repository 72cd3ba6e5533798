package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// resizePod is a Burstable pod of two containers whose cpu and memory
// (requests and limits) are the arguments; "side" restarts for a memory
// resize (resizePolicy RestartContainer).
func resizePod(name, mainCPU, mainMem, sideMem string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %[1]s}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %[2]s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    resources:
      requests: {cpu: %[3]s, memory: %[4]s}
      limits: {cpu: %[3]s, memory: %[4]s}
  - name: side
    image: %[2]s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    resizePolicy: [{resourceName: memory, restartPolicy: RestartContainer}]
    resources:
      requests: {cpu: 100m, memory: %[5]s}
      limits: {cpu: 100m, memory: %[5]s}
`, name, busybox, mainCPU, mainMem, sideMem)
}

// resizeCgroups reads the cfs quota and memory limit of a pod's cgroup
// (cgroup v1, as on this host) and of one of its containers.
type resizeCgroups struct {
	t   *testing.T
	pod string // the pod cgroup's cgroupfs path
}

func (c resizeCgroups) quota(id string) int64 {
	return readCgroupOr("cpu", filepath.Join(c.pod, id), "cpu.cfs_quota_us")
}

func (c resizeCgroups) memory(id string) int64 {
	return readCgroupOr("memory", filepath.Join(c.pod, id), "memory.limit_in_bytes")
}

// readCgroupOr reads a cgroup v1 value, or -2 when it cannot: a wait
// goes on while a container's cgroup is not there yet.
func readCgroupOr(controller, path, file string) int64 {
	data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, path, file))
	if err != nil {
		return -2
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return -2
	}
	return v
}

// wantCgroups waits for the pod's and main's cgroup values.
func (c resizeCgroups) want(mainID string, podQuota, podMem, mainQuota, mainMem int64) {
	c.t.Helper()
	waitFor(c.t, 60*time.Second, "the cgroups resized", func() (bool, string) {
		pq, pm, cq, cmem := c.quota(""), c.memory(""), c.quota(mainID), c.memory(mainID)
		return pq == podQuota && pm == podMem && cq == mainQuota && cmem == mainMem,
			fmt.Sprintf("pod quota %d memory %d, main quota %d memory %d; want %d %d %d %d", pq, pm, cq, cmem, podQuota, podMem, mainQuota, mainMem)
	})
}

func statusOf(p *v1.Pod, name string) *v1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func podCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// `berth apply` of a pod whose only change is its containers' cpu and
// memory resizes it in place: same UID, same containers, no restart, the
// container's and the pod's cgroups grown then shrunk, the status showing
// the new resources; a container whose resizePolicy asks for it restarts,
// alone. A resize beyond the node's allocatable is Deferred with the
// kubelet's message and changes nothing.
func TestResizeApplyInPlace(t *testing.T) {
	n := startNode(t, "--config", resizeNodeConfig(t))
	keepLogOnFailure(t, n)
	mib := int64(1 << 20)
	if _, err := n.apply(resizePod("rz", "200m", "64Mi", "32Mi")); err != nil {
		t.Fatal(err)
	}
	first := n.waitAPIRunning("rz", "", 90*time.Second)
	mainID := strings.TrimPrefix(statusOf(first, "main").ContainerID, "containerd://")
	sideID := statusOf(first, "side").ContainerID
	cg := resizeCgroups{t: t, pod: first.Annotations["berth.dev/pod-cgroup"]}
	cg.want(mainID, 30000, 96*mib, 20000, 64*mib)

	// Grow main's cpu and memory: in place.
	out, err := n.apply(resizePod("rz", "500m", "128Mi", "32Mi"))
	if err != nil || out != "pod/rz configured\n" {
		t.Fatalf("apply of a resize = %q, %v", out, err)
	}
	cg.want(mainID, 60000, 160*mib, 50000, 128*mib)
	var cur *v1.Pod
	waitFor(t, 30*time.Second, "the status to show the resize", func() (bool, string) {
		cur = n.apiPod("rz")
		m := statusOf(cur, "main")
		ok := m != nil && m.Resources != nil && m.Resources.Limits.Cpu().MilliValue() == 500 &&
			m.AllocatedResources.Memory().Value() == 128*mib && podCondition(cur, v1.PodResizeInProgress) == nil
		return ok, describe(cur) + fmt.Sprintf(" main=%+v conditions=%+v", m, cur.Status.Conditions)
	})
	if cur.UID != first.UID {
		t.Fatalf("the resize replaced the pod: %s -> %s", first.UID, cur.UID)
	}
	if m := statusOf(cur, "main"); m.RestartCount != 0 || !strings.HasSuffix(m.ContainerID, mainID) {
		t.Errorf("main was restarted: %+v", m)
	}
	if s := statusOf(cur, "side"); s.RestartCount != 0 || s.ContainerID != sideID {
		t.Errorf("side was restarted by a resize of main: %+v", s)
	}

	// Shrink it again: the pod cgroup shrinks after the container.
	if _, err := n.apply(resizePod("rz", "100m", "48Mi", "32Mi")); err != nil {
		t.Fatal(err)
	}
	cg.want(mainID, 20000, 80*mib, 10000, 48*mib)

	// side's memory: its policy restarts it, and only it.
	if _, err := n.apply(resizePod("rz", "100m", "48Mi", "40Mi")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "side restarted with its new memory", func() (bool, string) {
		cur = n.apiPod("rz")
		s := statusOf(cur, "side")
		if s == nil || s.State.Running == nil || s.ContainerID == sideID {
			return false, fmt.Sprintf("side %+v", s)
		}
		id := strings.TrimPrefix(s.ContainerID, "containerd://")
		return cg.memory(id) == 40*mib && cg.memory("") == 88*mib, fmt.Sprintf("side memory %d, pod %d", cg.memory(id), cg.memory(""))
	})
	if m := statusOf(cur, "main"); m.RestartCount != 0 || !strings.HasSuffix(m.ContainerID, mainID) {
		t.Errorf("main was restarted by a resize of side: %+v", m)
	}

	// More cpu than the node has: Deferred, with the kubelet's message.
	if _, err := n.apply(resizePod("rz", "100000", "48Mi", "40Mi")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "PodResizePending", func() (bool, string) {
		cur = n.apiPod("rz")
		c := podCondition(cur, v1.PodResizePending)
		return c != nil && c.Reason == v1.PodReasonDeferred && strings.HasPrefix(c.Message, "Node didn't have enough resource: cpu, requested: "),
			fmt.Sprintf("%+v", cur.Status.Conditions)
	})
	cg.want(mainID, 20000, 88*mib, 10000, 48*mib)
	if m := statusOf(cur, "main"); m.AllocatedResources.Cpu().MilliValue() != 100 {
		t.Errorf("a deferred resize changed the allocation: %v", m.AllocatedResources)
	}
}

// keepLogOnFailure copies berth's whole log next to the test's temp dirs
// when the test fails, before the node's clean-up removes it.
func keepLogOnFailure(t *testing.T, n *node) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		data, err := os.ReadFile(filepath.Join(n.root, "berth.log"))
		if err == nil {
			dst := filepath.Join(os.TempDir(), "berth-"+t.Name()+".log")
			if os.WriteFile(dst, data, 0o644) == nil {
				t.Logf("berth's log: %s", dst)
			}
		}
	})
}

// resizeNodeConfig keeps image GC off the test's busybox: this machine's
// disk is shared and often past the default 85%.
func resizeNodeConfig(t *testing.T) string {
	return writeConfig(t, `
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {nodefs.available: "1%", imagefs.available: "1%", memory.available: "1Mi"}
`)
}
