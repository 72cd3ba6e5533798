package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
	"github.com/berth-dev/berth/test/deviceplugin"
)

const widget = "example.com/widget"

// widgetPod is a pod whose one container asks for count widgets.
func widgetPod(name string, count int) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  containers:
  - name: app
    image: %s
    command: ["sleep", "3600"]
    resources:
      limits: {%s: %d}
`, name, busybox, widget, count)
}

// startWidgets runs the test device plugin for n with three widgets.
func startWidgets(t *testing.T, n *node) *deviceplugin.Plugin {
	t.Helper()
	p, err := deviceplugin.New(deviceplugin.Config{
		Dir: n.devicePlugins, ResourceName: widget, SocketName: "widget.sock",
		Devices:          []deviceplugin.Device{{ID: "w0"}, {ID: "w1"}, {ID: "w2"}},
		PreStartRequired: true,
		Logger:           slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatalf("device plugin: %v\n%s", err, n.logTail())
	}
	t.Cleanup(p.Stop)
	return p
}

// getJSON decodes the answer of the local API's path into v.
func (n *node) getJSON(path string, v any) {
	n.t.Helper()
	body, err := n.get(path)
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		n.t.Fatalf("%s: %v", path, err)
	}
}

func (n *node) devices() devicemanager.Snapshot {
	n.t.Helper()
	var snap devicemanager.Snapshot
	n.getJSON("/devices", &snap)
	return snap
}

func (n *node) waitAllocatable(want int) {
	n.t.Helper()
	waitFor(n.t, 30*time.Second, fmt.Sprintf("%d allocatable widgets", want), func() (bool, string) {
		for _, r := range n.devices().Resources {
			if r.Name == widget {
				return r.Allocatable == want && r.Connected, fmt.Sprintf("%+v", r)
			}
		}
		return false, "no widget resource"
	})
}

func (n *node) nodeEvents() []v1.Event {
	n.t.Helper()
	var list v1.EventList
	n.getJSON("/node/events", &list)
	return list.Items
}

// podResources lists the pod-resources API's view of n.
func (n *node) listPodResources() *podresourcesapi.ListPodResourcesResponse {
	n.t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.podResources, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := podresourcesapi.NewPodResourcesListerClient(conn).List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		n.t.Fatalf("pod-resources List: %v", err)
	}
	return resp
}

// A pod asking for two widgets gets two, sees them inside its container,
// and keeps them across a kill -9 of berth; a pod asking for more than is
// free is rejected with the kubelet's reason; the pod-resources API and
// berth devices show the allocation; a restarted plugin comes back.
func TestDevices(t *testing.T) {
	n := startNode(t)
	p := startWidgets(t, n)
	n.waitAllocatable(3)

	n.writeManifest("widgets.yaml", widgetPod("widgets", 2))
	pod := n.waitRunning("widgets", 60*time.Second)
	out := n.exec(pod, "app", "sh", "-c", `echo "$WIDGET_DEVICES"; for d in /dev/w*; do test -c $d && echo $d; done`)
	if got := strings.Fields(out); !slices.Equal(got, []string{"w0,w1", "/dev/w0", "/dev/w1"}) {
		t.Errorf("inside the container: %q, want WIDGET_DEVICES=w0,w1 and character devices /dev/w0 and /dev/w1", out)
	}
	if pre := p.Calls().PreStart; len(pre) != 1 || !slices.Equal(pre[0].DevicesIds, []string{"w0", "w1"}) {
		t.Errorf("PreStartContainer calls = %v", pre)
	}

	// The pod-resources API and berth devices show the allocation.
	var listed []string
	for _, pr := range n.listPodResources().PodResources {
		for _, c := range pr.Containers {
			for _, d := range c.Devices {
				listed = append(listed, fmt.Sprintf("%s/%s/%s=%s", pr.Name, c.Name, d.ResourceName, strings.Join(d.DeviceIds, ",")))
			}
		}
	}
	if want := []string{"widgets-" + nodeName + "/app/example.com/widget=w0,w1"}; !slices.Equal(listed, want) {
		t.Errorf("pod-resources List: %q, want %q", listed, want)
	}
	cli, err := n.berth("devices")
	if err != nil || !hasLine(cli, "default/widgets-"+nodeName, "app", widget, "w0,w1") ||
		!hasLine(cli, widget, "3", "3", "2", "connected") {
		t.Errorf("berth devices: %v\n%s", err, cli)
	}

	// Two more widgets than are free: the resource fit refuses it, and as
	// a static pod (critical) cannot preempt the other static pod either,
	// it is rejected with the kubelet's reason, naming the widget lacking.
	n.writeManifest("toomany.yaml", widgetPod("toomany", 2))
	waitFor(t, 30*time.Second, "toomany rejected", func() (bool, string) {
		p := n.pod("toomany")
		return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == devicemanager.ReasonUnexpectedAdmissionError, describe(p)
	})
	if msg := n.pod("toomany").Status.Message; !strings.Contains(msg, "[(res: example.com/widget, q: 1), ]") {
		t.Errorf("rejection message %q does not say which widget was lacking", msg)
	}
	n.removeManifest("toomany.yaml")

	// kill -9 and restart: the pod keeps running with the same devices,
	// is not admitted again, and the checkpoint does not change.
	ckpt := filepath.Join(n.devicePlugins, checkpoint.FileName)
	before, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	id := containerID(t, pod, "app")
	allocs := len(p.Calls().Allocate)
	registrations := p.Calls().Registrations
	n.kill9()
	n.start()
	if err := p.WaitRegistered(t.Context(), registrations+1); err != nil {
		t.Fatalf("the plugin did not register again after berth restarted: %v", err)
	}
	n.waitAllocatable(3)
	pod = n.waitRunning("widgets", 30*time.Second)
	if got := containerID(t, pod, "app"); got != id || pod.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the container changed across a berth restart: %s -> %s, restarts %d", id, got, pod.Status.ContainerStatuses[0].RestartCount)
	}
	if got := len(p.Calls().Allocate); got != allocs {
		t.Errorf("a running pod was allocated again after a restart: Allocate calls %d -> %d", allocs, got)
	}
	after, err := os.ReadFile(ckpt)
	if err != nil || string(after) != string(before) {
		t.Errorf("the checkpoint changed across a restart:\nbefore %s\nafter  %s", before, after)
	}

	// A plugin restart: it registers again and allocatable comes back.
	registrations = p.Calls().Registrations
	if err := p.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitRegistered(t.Context(), registrations+1); err != nil {
		t.Fatal(err)
	}
	n.waitAllocatable(3)

	// While the plugin is away, a new pod waits for it instead of failing,
	// and starts once it is back.
	p.Stop()
	waitFor(t, 30*time.Second, "the widgets to go unhealthy", func() (bool, string) {
		r := n.devices().Resources
		return len(r) == 1 && !r[0].Connected && r[0].Allocatable == 0, fmt.Sprintf("%+v", r)
	})
	n.writeManifest("waiter.yaml", widgetPod("waiter", 1))
	waitFor(t, 30*time.Second, "waiter pending on the plugin", func() (bool, string) {
		p := n.pod("waiter")
		return p != nil && p.Status.Phase == v1.PodPending && p.Status.Reason == devicemanager.ReasonDevicePluginNotReady, describe(p)
	})
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waiter := n.waitRunning("waiter", 60*time.Second)
	if out := strings.TrimSpace(n.exec(waiter, "app", "sh", "-c", `echo "$WIDGET_DEVICES"`)); out != "w2" {
		t.Errorf("waiter got widgets %q, want the free one, w2", out)
	}
	if pod := n.waitRunning("widgets", 10*time.Second); containerID(t, pod, "app") != id {
		t.Errorf("the first pod's container changed")
	}
}

// A corrupt checkpoint is moved aside and reported; berth recovers the
// allocations from the runtime and keeps running, and so does the pod.
func TestCorruptDeviceCheckpoint(t *testing.T) {
	n := startNode(t)
	startWidgets(t, n)
	n.waitAllocatable(3)
	n.writeManifest("widgets.yaml", widgetPod("widgets", 1))
	pod := n.waitRunning("widgets", 60*time.Second)
	id := containerID(t, pod, "app")

	n.stop()
	ckpt := filepath.Join(n.devicePlugins, checkpoint.FileName)
	data, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	// One device ID changed, the checksum kept: what a torn or tampered
	// file looks like.
	corrupt := strings.Replace(string(data), `"w0"`, `"w9"`, 1)
	if corrupt == string(data) {
		t.Fatalf("checkpoint has no w0 to corrupt: %s", data)
	}
	if err := os.WriteFile(ckpt, []byte(corrupt), 0o600); err != nil {
		t.Fatal(err)
	}
	n.start()
	waitFor(t, 30*time.Second, "a DeviceCheckpointCorrupt node event", func() (bool, string) {
		for _, e := range n.nodeEvents() {
			if e.Reason == devicemanager.ReasonCheckpointCorrupt {
				return strings.Contains(e.Message, "checksum"), e.Message
			}
		}
		return false, "no such event"
	})
	if moved, _ := filepath.Glob(ckpt + ".corrupt-*"); len(moved) != 1 {
		t.Errorf("quarantined checkpoints: %v", moved)
	}
	// Not the corrupt file's w9: the runtime's record of the container.
	if allocs := n.devices().Allocations; len(allocs) != 1 || !slices.Equal(allocs[0].DeviceIDs, []string{"w0"}) {
		t.Errorf("allocations after a corrupt checkpoint: %+v, want the pod's w0 recovered from the runtime", allocs)
	}
	pod = n.waitRunning("widgets", 30*time.Second)
	if containerID(t, pod, "app") != id {
		t.Errorf("the pod's container was replaced")
	}
	if out, err := n.berth("devices"); err != nil || !strings.Contains(out, devicemanager.ReasonCheckpointCorrupt) {
		t.Errorf("berth devices does not show the corrupt checkpoint: %v\n%s", err, out)
	}
}

// hasLine reports whether some line of out has exactly these fields.
func hasLine(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if slices.Equal(strings.Fields(line), fields) {
			return true
		}
	}
	return false
}
