package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// usernsPod is a pod of hostUsers: false with an emptyDir and a hostPath
// volume (standalone berth has no configMap files): hostDir holds a file
// only the host's root may read, which the pod's root reads through its
// idmapped mount.
func usernsPod(name, hostDir string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s, labels: {app: %s}}
spec:
  hostUsers: false
  terminationGracePeriodSeconds: 1
  volumes:
  - {name: data, emptyDir: {}}
  - {name: info, hostPath: {path: %s, type: Directory}}
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "echo written > /data/f && sleep 3600"]
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: info, mountPath: /info}
`, name, name, hostDir, busybox)
}

// quietDisk turns off the periodic image GC and the disk thresholds of
// eviction: the harness's default for a node on the test machine's disk
// (see setsDiskPolicy).
var quietDisk = []string{"--image-gc-high-threshold", "100", "--eviction-hard", "memory.available<100Mi"}

// hostSecretDir makes a directory under the node's root dir with a file
// that only the host's root can read.
func hostSecretDir(t *testing.T, n *node) string {
	dir := filepath.Join(n.root, "userns-host")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hostUIDMap reads /proc/<pid>/uid_map of the container's process from the
// host: the one line "0 <host ID> <length>" of a pod of its own.
func (n *node) hostUIDMap(pod *v1.Pod) (hostID, length uint64) {
	n.t.Helper()
	id := containerID(n.t, pod, "app")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.cri.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		n.t.Fatalf("container status: %v", err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil || info.Pid <= 1 {
		n.t.Fatalf("container %s: no pid in the runtime's info (%v)", id, err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", info.Pid))
	if err != nil {
		n.t.Fatal(err)
	}
	var inside uint64
	if _, err := fmt.Sscan(string(data), &inside, &hostID, &length); err != nil || inside != 0 {
		n.t.Fatalf("%s: uid_map %q: want one mapping of uid 0 (%v)", pod.Name, data, err)
	}
	if strings.Count(strings.TrimSpace(string(data)), "\n") != 0 {
		n.t.Fatalf("%s: uid_map %q: want one line", pod.Name, data)
	}
	return hostID, length
}

// wantOwnUsers checks a running pod of hostUsers: false: its root is an
// unprivileged host ID, its range is the one recorded in its mappings file,
// and its volumes work. It returns its first host ID.
func (n *node) wantOwnUsers(pod *v1.Pod) uint64 {
	n.t.Helper()
	hostID, length := n.hostUIDMap(pod)
	n.t.Logf("%s: uid_map 0 %d %d", pod.Name, hostID, length)
	if hostID < 65536 || length != 65536 {
		n.t.Errorf("%s: uid 0 maps to host %d (+%d), want an unprivileged range of 65536", pod.Name, hostID, length)
	}
	file, err := os.ReadFile(filepath.Join(n.root, "pods", string(pod.UID), "userns"))
	if err != nil {
		n.t.Fatalf("%s: mappings file: %v", pod.Name, err)
	}
	if want := fmt.Sprintf(`"hostId":%d,"containerId":0,"length":65536`, hostID); !strings.Contains(string(file), want) {
		n.t.Errorf("%s: mappings file %s, want %s", pod.Name, file, want)
	}
	out := n.exec(pod, "app", "sh", "-c", "id -u; cat /data/f; echo more > /data/g && cat /data/g; cat /info/secret")
	if want := "0\nwritten\nmore\nroot only\n"; out != want {
		n.t.Errorf("%s: in the container: %q, want %q", pod.Name, out, want)
	}
	return hostID
}

// A pod of hostUsers: false on containerd 2 runs with its root mapped to an
// unprivileged host range, its volumes work, two pods get disjoint ranges,
// the ranges survive a restart of berth (same mapping, none handed out
// twice), and a removed pod's range is released.
func TestUserNamespacesOnContainerd2(t *testing.T) {
	n := startNodeOnContainerd2(t, quietDisk...)
	host := hostSecretDir(t, n)
	n.writeManifest("a.yaml", usernsPod("usa", host))
	n.writeManifest("b.yaml", usernsPod("usb", host))
	a := n.waitRunning("usa", 3*time.Minute)
	b := n.waitRunning("usb", 3*time.Minute)
	ha, hb := n.wantOwnUsers(a), n.wantOwnUsers(b)
	if ha == hb {
		t.Fatalf("two pods share host IDs from %d", ha)
	}

	n.kill9()
	n.start()
	a2 := n.waitRunning("usa", 2*time.Minute)
	if a2.UID != a.UID || containerID(t, a2, "app") != containerID(t, a, "app") {
		t.Fatalf("usa was replaced across the restart: %s", describe(a2))
	}
	if h := n.wantOwnUsers(a2); h != ha {
		t.Errorf("usa's range moved from %d to %d across the restart", ha, h)
	}
	n.writeManifest("c.yaml", usernsPod("usc", host))
	c := n.waitRunning("usc", 3*time.Minute)
	if hc := n.wantOwnUsers(c); hc == ha || hc == hb {
		t.Errorf("a pod started after the restart got a held range: %d (held: %d, %d)", hc, ha, hb)
	}

	n.removeManifest("a.yaml")
	waitFor(t, 2*time.Minute, "usa gone and its range released", func() (bool, string) {
		_, err := os.Stat(filepath.Join(n.root, "pods", string(a.UID)))
		return n.pod("usa") == nil && os.IsNotExist(err) && strings.Contains(n.berthLog(), "released a user namespace"), describe(n.pod("usa"))
	})
	// The lowest free range is a's again: nothing else holds it.
	n.writeManifest("d.yaml", usernsPod("usd", host))
	d := n.waitRunning("usd", 3*time.Minute)
	if hd := n.wantOwnUsers(d); hd != ha {
		t.Errorf("a new pod got host IDs from %d, want usa's released %d", hd, ha)
	}
}

// On containerd 1.6, which reports no user namespace support, a pod of
// hostUsers: false is refused at admission with the kubelet's reason (a
// Failed status and an event), never given a sandbox, never retried; a
// static pod that shares a host namespace with it is refused as invalid.
func TestUserNamespacesRefusedWithoutSupport(t *testing.T) {
	// The host's containerd (Debian's 1.6), whatever runtime the run's
	// other nodes manage.
	n := startNodeWithRuntime(t, "", "", quietDisk...)
	host := hostSecretDir(t, n)
	n.writeManifest("userns.yaml", usernsPod("nouserns", host))
	n.writeManifest("hostnet.yaml", strings.Replace(usernsPod("hostnet", host), "  hostUsers: false\n",
		"  hostUsers: false\n  hostNetwork: true\n", 1))
	var pod *v1.Pod
	waitFor(t, time.Minute, "nouserns refused", func() (bool, string) {
		pod = n.pod("nouserns")
		return pod != nil && pod.Status.Phase == v1.PodFailed, describe(pod)
	})
	const want = "spec.hostUsers: can't set `spec.hostUsers: false`, runtime does not support user namespaces"
	if pod.Status.Reason != "UnsupportedPodField" || !strings.Contains(pod.Status.Message, want) {
		t.Errorf("status %s: %q, want UnsupportedPodField: %q", pod.Status.Reason, pod.Status.Message, want)
	}
	if !hasEvent(n.events("nouserns"), v1.EventTypeWarning, "UnsupportedPodField", "") {
		t.Errorf("no UnsupportedPodField event: %v", n.events("nouserns"))
	}
	if sbs := n.sandboxes(string(pod.UID)); len(sbs) != 0 {
		t.Errorf("the refused pod got %d sandboxes", len(sbs))
	}
	if _, err := os.Stat(filepath.Join(n.root, "pods", string(pod.UID), "userns")); !os.IsNotExist(err) {
		t.Errorf("the refused pod got a range: %v", err)
	}
	for _, e := range n.events("nouserns") {
		if e.Reason == "FailedCreatePodSandBox" {
			t.Errorf("a sandbox was tried: %s", e.Message)
		}
	}
	waitFor(t, time.Minute, "hostnet refused as invalid", func() (bool, string) {
		log := n.berthLog()
		return strings.Contains(log, "spec.hostNetwork: Forbidden: when `hostUsers` is false"), "no such error in berth's log"
	})
	if p := n.pod("hostnet"); p != nil && p.Status.Phase == v1.PodRunning {
		t.Errorf("hostnet runs: %s", describe(p))
	}
}

// Against the real control plane, on containerd 2: a pod of hostUsers:
// false created through the API runs with its root mapped to an
// unprivileged host range, and reads its configMap volume's files (owned
// by the host's root) through their idmapped mount.
func TestUserNamespacesClusterOnContainerd2(t *testing.T) {
	cp, client, _ := startControlPlane(t)
	const name = "userns-node"
	kubeconfig, err := cp.NodeKubeconfig(name)
	if err != nil {
		t.Fatal(err)
	}
	n := startNodeWithRuntime(t, "", containerd2Dir(t), "--node-name", name, "--kubeconfig", kubeconfig,
		"--node-ip", "127.0.0.1", "--port", fmt.Sprint(freePort(t)), "--client-ca-file", cp.KubeletClientCA(),
		"--node-status-update-frequency", "2s", quietDisk[0], quietDisk[1], quietDisk[2], quietDisk[3])
	waitNodeReady(t, client, name, true, 2*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	wantRuntimeFeatures(t, client, name)
	cm := &v1.ConfigMap{Data: map[string]string{"greeting": "hello"}}
	cm.Name, cm.Namespace = "userns-cm", "default"
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{Spec: v1.PodSpec{
		NodeName:  name,
		HostUsers: ptr.To(false),
		Volumes: []v1.Volume{{Name: "cm", VolumeSource: v1.VolumeSource{
			ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: cm.Name}}}}},
		Containers: []v1.Container{{Name: "app", Image: busybox, Command: []string{"sleep", "3600"},
			VolumeMounts: []v1.VolumeMount{{Name: "cm", MountPath: "/cm"}}}},
		TerminationGracePeriodSeconds: ptr.To(int64(1)),
	}}
	pod.Name, pod.Namespace = "userns", "default"
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *v1.Pod
	waitFor(t, 3*time.Minute, "the userns pod running", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, "userns", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = p
		return p.Status.Phase == v1.PodRunning && podReady(p), describe(p)
	})
	hostID, length := n.hostUIDMap(got)
	t.Logf("userns: uid_map 0 %d %d", hostID, length)
	if hostID < 65536 || length != 65536 {
		t.Errorf("uid 0 maps to host %d (+%d), want an unprivileged range of 65536", hostID, length)
	}
	if out := n.exec(got, "app", "sh", "-c", "id -u; cat /cm/greeting"); out != "0\nhello" {
		t.Errorf("in the container: %q, want root reading the configMap", out)
	}
}

// userNamespaces.idsPerPod gives each pod that many host IDs, from a
// range aligned to it, as the kubelet does.
func TestUserNamespacesIDsPerPod(t *testing.T) {
	cfg := writeConfig(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
userNamespaces: {idsPerPod: 131072}
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: 100Mi}
`)
	n := startNodeOnContainerd2(t, "--config", cfg)
	n.writeManifest("wide.yaml", usernsPod("wide", hostSecretDir(t, n)))
	pod := n.waitRunning("wide", 3*time.Minute)
	hostID, length := n.hostUIDMap(pod)
	if length != 131072 || hostID < 131072 || hostID%131072 != 0 {
		t.Errorf("uid 0 maps to host %d (+%d), want 131072 IDs from a multiple of 131072", hostID, length)
	}
}

// A root dir others cannot search (made beforehand with mode 0700) keeps
// the runtime from reaching a user-namespaced pod's root filesystem: such
// a pod is refused at admission naming the directory, not retried with
// FailedCreatePodSandBox for ever.
func TestUserNamespacesRefusedUnderClosedRootDir(t *testing.T) {
	n := startNodeOnContainerd2(t, quietDisk...)
	n.stop()
	if err := os.Chmod(n.root, 0o700); err != nil {
		t.Fatal(err)
	}
	n.start()
	host := hostSecretDir(t, n)
	n.writeManifest("userns.yaml", usernsPod("closed", host))
	var pod *v1.Pod
	waitFor(t, time.Minute, "closed refused", func() (bool, string) {
		pod = n.pod("closed")
		return pod != nil && pod.Status.Phase == v1.PodFailed, describe(pod)
	})
	want := n.root + " (mode 0700) is not searchable by other users"
	if pod.Status.Reason != "UnsupportedPodField" || !strings.Contains(pod.Status.Message, want) {
		t.Errorf("status %s: %q, want UnsupportedPodField: %q", pod.Status.Reason, pod.Status.Message, want)
	}
	if sbs := n.sandboxes(string(pod.UID)); len(sbs) != 0 {
		t.Errorf("the refused pod got %d sandboxes", len(sbs))
	}
}

// wantRuntimeFeatures checks what the Node says of containerd 2: its
// default handler does recursive read-only mounts and user namespaces
// (status.runtimeHandlers, which tell the scheduler and users where
// hostUsers: false can run) and it honours supplementalGroupsPolicy
// (status.features).
func wantRuntimeFeatures(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	node, err := client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(node.Status.RuntimeHandlers, func(h v1.NodeRuntimeHandler) bool { return h.Name == "" })
	if i < 0 {
		t.Fatalf("runtimeHandlers %+v: no default handler", node.Status.RuntimeHandlers)
	}
	f := node.Status.RuntimeHandlers[i].Features
	if f == nil || !ptr.Deref(f.UserNamespaces, false) || !ptr.Deref(f.RecursiveReadOnlyMounts, false) {
		t.Errorf("the default handler's features %+v, want user namespaces and recursive read-only mounts", f)
	}
	if nf := node.Status.Features; nf == nil || !ptr.Deref(nf.SupplementalGroupsPolicy, false) {
		t.Errorf("status.features %+v, want supplementalGroupsPolicy", nf)
	}
}
