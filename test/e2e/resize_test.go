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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	// kill -9: the checkpoint keeps the allocation, the deferred resize
	// stays deferred, nothing restarts and nothing is resized again.
	n.kill9()
	n.start()
	waitFor(t, 60*time.Second, "the pod adopted, its resize still deferred", func() (bool, string) {
		cur = n.apiPod("rz")
		if cur == nil {
			return false, "no pod"
		}
		c, m := podCondition(cur, v1.PodResizePending), statusOf(cur, "main")
		return c != nil && c.Reason == v1.PodReasonDeferred && m != nil && m.State.Running != nil &&
			m.Resources != nil && m.Resources.Limits.Cpu().MilliValue() == 100, describe(cur)
	})
	cg.want(mainID, 20000, 88*mib, 10000, 48*mib)
	if m := statusOf(cur, "main"); cur.UID != first.UID || m.RestartCount != 0 || !strings.HasSuffix(m.ContainerID, mainID) {
		t.Errorf("after kill -9 the pod or main changed: %s %+v", cur.UID, m)
	}
	if s := statusOf(cur, "side"); s.RestartCount != 1 || s.AllocatedResources.Memory().Value() != 40*mib {
		t.Errorf("after kill -9 side = %+v", s)
	}
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

// resizePatch is the resize subresource's patch of one container's cpu
// and memory (requests = limits).
func resizePatch(container, cpu, mem string) string {
	return fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`,
		container, cpu, mem, cpu, mem)
}

// In cluster mode, `kubectl patch --subresource resize` grows and shrinks a
// running container's cpu and memory without a restart (its cgroup and
// the pod's checked), restarts only the container whose resizePolicy asks
// for it, reports the resources, allocatedResources and observedGeneration
// in the API status, and a resize that does not fit beside another pod
// stays pending (Deferred, the kubelet's message) with nothing changed
// until that pod goes. The node runs containerd 2 (BERTH_CONTAINERD2_BIN);
// TestResizeApplyInPlace covers the default runtime.
func TestResizeCluster(t *testing.T) {
	cp, client, _ := startControlPlane(t)
	cn := startClusterNodeOn(t, cp, "berth-rz", containerd2Dir(t), "--config", resizeNodeConfig(t))
	node := waitNodeReady(t, client, cn.name, true, 90*time.Second)
	if v := strings.TrimPrefix(node.Status.NodeInfo.ContainerRuntimeVersion, "containerd://"); !strings.HasPrefix(strings.TrimPrefix(v, "v"), "2.") {
		t.Fatalf("the node runs %s, not containerd 2", v)
	}
	mib := int64(1 << 20)

	manifest := strings.Replace(resizePod("rz", "200m", "64Mi", "32Mi"), "spec:\n", "spec:\n  nodeName: berth-rz\n", 1)
	applyYAML(t, cp, manifest)
	get := func() *v1.Pod {
		p, err := client.CoreV1().Pods("default").Get(t.Context(), "rz", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var first *v1.Pod
	waitFor(t, 2*time.Minute, "rz running", func() (bool, string) {
		first = get()
		return first.Status.Phase == v1.PodRunning && podReady(first), describe(first)
	})
	mainID := strings.TrimPrefix(statusOf(first, "main").ContainerID, "containerd://")
	sideID := statusOf(first, "side").ContainerID
	local := cn.apiPodUID(string(first.UID))
	cg := resizeCgroups{t: t, pod: local.Annotations["berth.dev/pod-cgroup"]}
	cg.want(mainID, 30000, 96*mib, 20000, 64*mib)

	settled := func(what string, check func(p *v1.Pod) bool) *v1.Pod {
		t.Helper()
		var p *v1.Pod
		waitFor(t, 60*time.Second, what, func() (bool, string) {
			p = get()
			ok := p.Status.ObservedGeneration == p.Generation && podCondition(p, v1.PodResizeInProgress) == nil &&
				podCondition(p, v1.PodResizePending) == nil && check(p)
			return ok, fmt.Sprintf("generation %d %s", p.Generation, describe(p))
		})
		return p
	}
	unrestarted := func(p *v1.Pod) {
		t.Helper()
		if m := statusOf(p, "main"); m.RestartCount != 0 || !strings.HasSuffix(m.ContainerID, mainID) {
			t.Errorf("main was restarted: %+v", m)
		}
	}

	kubectl(t, cp, "patch", "pod", "rz", "--subresource", "resize", "--patch", resizePatch("main", "500m", "128Mi"))
	cg.want(mainID, 60000, 160*mib, 50000, 128*mib)
	p := settled("the grown resources in the status", func(p *v1.Pod) bool {
		m := statusOf(p, "main")
		return m.Resources != nil && m.Resources.Limits.Cpu().MilliValue() == 500 && m.Resources.Limits.Memory().Value() == 128*mib &&
			m.AllocatedResources.Cpu().MilliValue() == 500
	})
	unrestarted(p)
	if s := statusOf(p, "side"); s.ContainerID != sideID || s.RestartCount != 0 {
		t.Errorf("side was restarted by a resize of main: %+v", s)
	}

	kubectl(t, cp, "patch", "pod", "rz", "--subresource", "resize", "--patch", resizePatch("main", "100m", "48Mi"))
	cg.want(mainID, 20000, 80*mib, 10000, 48*mib)
	p = settled("the shrunk resources in the status", func(p *v1.Pod) bool {
		m := statusOf(p, "main")
		return m.Resources != nil && m.Resources.Limits.Memory().Value() == 48*mib
	})
	unrestarted(p)

	// side's memory policy is RestartContainer: it alone restarts.
	kubectl(t, cp, "patch", "pod", "rz", "--subresource", "resize", "--patch", resizePatch("side", "100m", "40Mi"))
	p = settled("side restarted with its new memory", func(p *v1.Pod) bool {
		s := statusOf(p, "side")
		if s.State.Running == nil || s.ContainerID == sideID || s.RestartCount != 1 {
			return false
		}
		return cg.memory(strings.TrimPrefix(s.ContainerID, "containerd://")) == 40*mib && cg.memory("") == 88*mib
	})
	unrestarted(p)

	// More cpu than the other pods leave (the API server itself refuses
	// more than the node's allocatable): pending, Deferred with the
	// kubelet's message, nothing changed; admitted once the other pod goes.
	hog := node.Status.Allocatable.Cpu().MilliValue() - 300
	applyYAML(t, cp, fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  nodeName: berth-rz
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    resources: {requests: {cpu: %dm}}
`, busybox, hog))
	waitFor(t, 2*time.Minute, "hog running", func() (bool, string) {
		h, err := client.CoreV1().Pods("default").Get(t.Context(), "hog", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return h.Status.Phase == v1.PodRunning, describe(h)
	})
	kubectl(t, cp, "patch", "pod", "rz", "--subresource", "resize", "--patch", resizePatch("main", "300m", "48Mi"))
	want := fmt.Sprintf("Node didn't have enough resource: cpu, requested: 400, used: %d, capacity: %d", hog, hog+300)
	waitFor(t, 60*time.Second, "PodResizePending", func() (bool, string) {
		p = get()
		c := podCondition(p, v1.PodResizePending)
		return c != nil && c.Reason == v1.PodReasonDeferred && c.ObservedGeneration == p.Generation && c.Message == want,
			fmt.Sprintf("%+v", p.Status.Conditions)
	})
	cg.want(mainID, 20000, 88*mib, 10000, 48*mib)
	if m := statusOf(p, "main"); m.AllocatedResources.Cpu().MilliValue() != 100 || m.Resources.Limits.Cpu().MilliValue() != 100 {
		t.Errorf("a deferred resize changed main: %+v", m)
	}
	unrestarted(p)
	kubectl(t, cp, "delete", "pod", "hog", "--wait=false")
	cg.want(mainID, 40000, 88*mib, 30000, 48*mib)
	p = settled("the deferred resize done", func(p *v1.Pod) bool {
		m := statusOf(p, "main")
		return m.Resources != nil && m.Resources.Limits.Cpu().MilliValue() == 300
	})
	unrestarted(p)
}

// apiPodUID is the pod of uid as the node's own API shows it.
func (n *node) apiPodUID(uid string) *v1.Pod {
	n.t.Helper()
	for _, p := range n.pods() {
		if string(p.UID) == uid {
			return &p
		}
	}
	n.t.Fatalf("the node does not show pod %s", uid)
	return nil
}
