package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
	"github.com/berth-dev/berth/test/deviceplugin"
)

// When the device checkpoint is lost while berth is down (corrupt, or a
// directory in its place), berth moves it aside, reports it, starts, and
// recovers from the runtime's containers which devices they hold: a new pod
// never gets a device that a running pod holds, and the running pod keeps
// its device, also when its container restarts. Three widgets, one held:
// a pod asking for two must get the two free ones (berth before this fix
// gave it w0 and w1, and the directory stopped it at every start).
func TestDeviceCheckpointLostRecoveredFromRuntime(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"corrupt", func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The holder's w0 renamed, the checksum kept: a torn file.
			corrupt := strings.Replace(string(data), `"w0"`, `"w9"`, 1)
			if corrupt == string(data) {
				t.Fatalf("checkpoint has no w0 to corrupt: %s", data)
			}
			if err := os.WriteFile(path, []byte(corrupt), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(path, "inside"), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t)
			p := startWidgets(t, n)
			n.waitAllocatable(3)
			n.writeManifest("holder.yaml", widgetPod("holder", 1))
			holder := n.waitRunning("holder", 60*time.Second)
			n.wantWidgets(holder, "w0")
			id := containerID(t, holder, "app")

			n.stop()
			ckpt := filepath.Join(n.devicePlugins, checkpoint.FileName)
			tc.damage(t, ckpt)
			registrations := p.Calls().Registrations
			n.start()
			if err := p.WaitRegistered(t.Context(), registrations+1); err != nil {
				t.Fatalf("the plugin did not register again: %v", err)
			}
			n.waitAllocatable(3)
			n.wantLostCheckpointHandled(ckpt, holder)

			// The new pod gets the two free widgets; the holder keeps w0.
			n.writeManifest("pair.yaml", widgetPod("pair", 2))
			pair := n.waitRunning("pair", 60*time.Second)
			n.wantWidgets(pair, "w1,w2")
			holder = n.waitRunning("holder", 10*time.Second)
			if got := containerID(t, holder, "app"); got != id {
				t.Errorf("the holder's container changed: %s -> %s", id, got)
			}
			n.wantWidgets(holder, "w0")

			// A third pod finds no widget: the kubelet's admission refuses it.
			n.writeManifest("third.yaml", widgetPod("third", 1))
			waitFor(t, 30*time.Second, "third rejected", func() (bool, string) {
				p := n.pod("third")
				return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == devicemanager.ReasonUnexpectedAdmissionError, describe(p)
			})

			// The holder's container restarts: the recovered allocation gives
			// it w0 again, with what the plugin answers for it.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if err := n.cri.StopContainer(ctx, id, 0); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 60*time.Second, "holder's container restarted", func() (bool, string) {
				p := n.pod("holder")
				if p == nil || p.Status.Phase != v1.PodRunning || !podReady(p) || len(p.Status.ContainerStatuses) != 1 {
					return false, describe(p)
				}
				return p.Status.ContainerStatuses[0].RestartCount == 1, describe(p)
			})
			n.wantWidgets(n.pod("holder"), "w0")
		})
	}
}

// wantWidgets checks the widgets a pod's container sees: the plugin's
// WIDGET_DEVICES and a character device for each.
func (n *node) wantWidgets(pod *v1.Pod, want string) {
	n.t.Helper()
	out := n.exec(pod, "app", "sh", "-c", `echo "$WIDGET_DEVICES"; for d in /dev/w*; do test -c $d && echo $d; done`)
	wantFields := []string{want}
	for _, w := range strings.Split(want, ",") {
		wantFields = append(wantFields, "/dev/"+w)
	}
	if got := strings.Fields(out); !slices.Equal(got, wantFields) {
		n.t.Errorf("pod %s sees widgets %q, want %q", pod.Name, got, wantFields)
	}
}

// wantLostCheckpointHandled checks that the bad checkpoint was moved aside
// and reported, and that a new one records what the holder holds.
func (n *node) wantLostCheckpointHandled(ckpt string, holder *v1.Pod) {
	t := n.t
	t.Helper()
	var reasons []string
	waitFor(t, 30*time.Second, "a DeviceCheckpointCorrupt node event", func() (bool, string) {
		reasons = nil
		for _, e := range n.nodeEvents() {
			reasons = append(reasons, e.Reason)
		}
		return slices.Contains(reasons, devicemanager.ReasonCheckpointCorrupt), strings.Join(reasons, ",")
	})
	if !slices.Contains(reasons, devicemanager.ReasonAllocationsRecovered) {
		t.Errorf("no %s node event: %q", devicemanager.ReasonAllocationsRecovered, reasons)
	}
	if moved, _ := filepath.Glob(ckpt + ".corrupt-*"); len(moved) != 1 {
		t.Errorf("quarantined checkpoints: %v", moved)
	}
	var got []string
	for _, a := range n.devices().Allocations {
		got = append(got, a.PodUID+"/"+a.Container+"="+strings.Join(a.DeviceIDs, ","))
	}
	if want := []string{string(holder.UID) + "/app=w0"}; !slices.Equal(got, want) {
		t.Errorf("allocations after the restart: %q, want %q", got, want)
	}
	data, err := checkpoint.Read(n.devicePlugins)
	if err != nil {
		t.Errorf("no new checkpoint: %v", err)
		return
	}
	entries, _, _, err := checkpoint.Decode(data)
	if err != nil || len(entries) != 1 || entries[0].PodUID != string(holder.UID) ||
		!slices.Equal(entries[0].DeviceIDs[-1], []string{"w0"}) {
		t.Errorf("new checkpoint entries = %+v (%v)", entries, err)
	}
}

// A valid but out-of-date device checkpoint put back while berth is down
// (an older copy, from before a pod got its device) does not hide that
// pod's device: berth takes it from the pod's container, reports the
// correction, and gives a new pod only the free widgets. berth before this
// fix trusted the old copy and gave the new pod the holder's w0 (make chaos,
// seed 20261127, fault 121).
func TestDeviceCheckpointStaleCorrectedFromRuntime(t *testing.T) {
	n := startNode(t)
	p := startWidgets(t, n)
	n.waitAllocatable(3)
	var before []byte
	waitFor(t, 30*time.Second, "a device checkpoint", func() (bool, string) {
		var err error
		before, err = checkpoint.Read(n.devicePlugins)
		return err == nil, fmt.Sprint(err)
	})
	n.writeManifest("holder.yaml", widgetPod("holder", 1))
	holder := n.waitRunning("holder", 60*time.Second)
	n.wantWidgets(holder, "w0")

	n.restartWithCheckpoint(p, before)

	n.writeManifest("pair.yaml", widgetPod("pair", 2))
	pair := n.waitRunning("pair", 60*time.Second)
	n.wantWidgets(pair, "w1,w2")
	n.wantWidgets(n.waitRunning("holder", 10*time.Second), "w0")
	waitFor(t, 30*time.Second, "a DeviceCheckpointStale node event", func() (bool, string) {
		var reasons []string
		for _, e := range n.nodeEvents() {
			reasons = append(reasons, e.Reason)
		}
		return slices.Contains(reasons, devicemanager.ReasonCheckpointStale), strings.Join(reasons, ",")
	})
}

// An out-of-date checkpoint that books a device to a pod that is gone,
// while another pod's container now runs with it, gives way to the
// container: berth's books name the device once, for the pod that has it.
// berth before this fix kept both claims until the next admission freed
// the pod that is gone (make chaos, seed 1795785700874727890, fault 33).
func TestDeviceCheckpointStaleClaimOfAGonePodDropped(t *testing.T) {
	n := startNode(t)
	p := startWidgets(t, n)
	n.waitAllocatable(3)
	// Quick to stop: sleep as PID 1 ignores SIGTERM.
	n.writeManifest("first.yaml", strings.Replace(widgetPod("first", 1), "spec:\n", "spec:\n  terminationGracePeriodSeconds: 1\n", 1))
	first := n.waitRunning("first", 60*time.Second)
	n.wantWidgets(first, "w0")
	var before []byte
	waitFor(t, 30*time.Second, "a checkpoint with first's w0", func() (bool, string) {
		data, err := checkpoint.Read(n.devicePlugins)
		before = data
		return err == nil && strings.Contains(string(data), string(first.UID)), fmt.Sprint(err)
	})
	n.removeManifest("first.yaml")
	waitFor(t, 60*time.Second, "first gone", func() (bool, string) { return n.pod("first") == nil, "listed" })
	// A pod is freed at the next admission: an admission that fails (three
	// widgets asked) frees first's w0 for holder.
	n.writeManifest("greedy.yaml", widgetPod("greedy", 3))
	waitFor(t, 60*time.Second, "first's w0 freed", func() (bool, string) {
		for _, a := range n.devices().Allocations {
			if a.PodUID == string(first.UID) {
				return false, "booked"
			}
		}
		return true, ""
	})
	n.removeManifest("greedy.yaml")
	n.writeManifest("holder.yaml", widgetPod("holder", 1))
	holder := n.waitRunning("holder", 60*time.Second)
	n.wantWidgets(holder, "w0")

	n.restartWithCheckpoint(p, before)
	var got []string
	for _, a := range n.devices().Allocations {
		got = append(got, a.PodUID+"="+strings.Join(a.DeviceIDs, ","))
	}
	if want := []string{string(holder.UID) + "=w0"}; !slices.Equal(got, want) {
		t.Errorf("allocations after the stale checkpoint: %q, want %q (first was %s)", got, want, first.UID)
	}
}

// restartWithCheckpoint stops berth, puts data back as its device
// checkpoint, starts it again and waits for the plugin to register anew.
func (n *node) restartWithCheckpoint(p *deviceplugin.Plugin, data []byte) {
	t := n.t
	t.Helper()
	n.stop()
	if err := checkpoint.Write(n.devicePlugins, data); err != nil {
		t.Fatal(err)
	}
	registrations := p.Calls().Registrations
	n.start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitRegistered(ctx, registrations+1); err != nil {
		t.Fatalf("the plugin did not register again: %v", err)
	}
	n.waitAllocatable(3)
}
