package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
	"github.com/berth-dev/berth/test/deviceplugin"
)

// criContainer is a container berth created for pod uid; devices is its
// AnnotationDevices, none when "".
func criContainer(id, uid, name string, createdAt int64, devices string) *runtimeapi.Container {
	c := &runtimeapi.Container{Id: id, CreatedAt: createdAt, Labels: map[string]string{
		container.LabelManagedBy: "true", container.LabelPodUID: uid, container.LabelContainerName: name,
	}}
	if devices != "" {
		c.Annotations = map[string]string{AnnotationDevices: devices}
	}
	return c
}

// entry is a rebuilt checkpoint entry, written "pod/container/resource=ids".
func entryText(e checkpoint.PodDevicesEntry) string {
	return fmt.Sprintf("%s/%s/%s=%s", e.PodUID, e.ContainerName, e.ResourceName, strings.Join(e.DeviceIDs[nodeWithoutTopology], ","))
}

func TestRebuildFromContainers(t *testing.T) {
	const w0, w01 = `{"example.com/widget":["w0"]}`, `{"example.com/widget":["w1","w0"]}`
	foreign := criContainer("f", "x", "app", 1, w0)
	delete(foreign.Labels, container.LabelManagedBy)
	noUID := criContainer("n", "", "app", 1, w0)
	tests := []struct {
		name         string
		containers   []*runtimeapi.Container
		want         []string
		wantProblems []string // substrings, in order
	}{
		{name: "none"},
		{name: "without devices, or not berth's", containers: []*runtimeapi.Container{
			criContainer("a", "pa", "app", 1, ""), foreign}},
		{name: "one container, IDs sorted", containers: []*runtimeapi.Container{criContainer("a", "pa", "app", 1, w01)},
			want: []string{"pa/app/example.com/widget=w0,w1"}},
		{name: "two resources and two pods, sorted", containers: []*runtimeapi.Container{
			criContainer("b", "pb", "app", 1, w0),
			criContainer("a", "pa", "app", 1, `{"vendor.com/gpu":["g0"],"example.com/widget":["w1"]}`)},
			want: []string{"pa/app/example.com/widget=w1", "pa/app/vendor.com/gpu=g0", "pb/app/example.com/widget=w0"}},
		{name: "the newest attempt of a container wins", containers: []*runtimeapi.Container{
			criContainer("old", "pa", "app", 1, `{"example.com/widget":["w9"]}`),
			criContainer("new", "pa", "app", 2, w0)},
			want: []string{"pa/app/example.com/widget=w0"}},
		{name: "an unreadable newest attempt gives way to an older one", containers: []*runtimeapi.Container{
			criContainer("old", "pa", "app", 1, w0),
			criContainer("new", "pa", "app", 2, `{"example.com/widget":`)},
			want:         []string{"pa/app/example.com/widget=w0"},
			wantProblems: []string{"container new (pod pa, container app): annotation berth.dev/devices: not a JSON object"}},
		{name: "an init container hands its devices on within the pod", containers: []*runtimeapi.Container{
			criContainer("i", "pa", "init", 1, w01), criContainer("a", "pa", "app", 2, w0)},
			want: []string{"pa/app/example.com/widget=w0", "pa/init/example.com/widget=w0,w1"}},
		{name: "two pods claim one device: both kept, reported", containers: []*runtimeapi.Container{
			criContainer("a", "pa", "app", 1, w0), criContainer("b", "pb", "app", 1, w01)},
			want:         []string{"pa/app/example.com/widget=w0", "pb/app/example.com/widget=w0,w1"},
			wantProblems: []string{"device w0 of example.com/widget is recorded for pods pa, pb"}},
		{name: "bad values are skipped, naming the container", containers: []*runtimeapi.Container{
			criContainer("c1", "p1", "app", 1, `[]`),
			criContainer("c2", "p2", "app", 1, `{}`),
			criContainer("c3", "p3", "app", 1, `{"cpu":["0"]}`),
			criContainer("c4", "p4", "app", 1, `{"example.com/widget":[]}`),
			criContainer("c5", "p5", "app", 1, `{"example.com/widget":[""]}`),
			criContainer("c6", "p6", "app", 1, `{"example.com/widget":["w0","w0"]}`),
			criContainer("c7", "p7", "app", 1, `{"example.com/widget":["w0"]} trailing`),
			criContainer("c8", "p8", "app", 1, `{"example.com/widget":["`+strings.Repeat("w", maxDevicesAnnotation)+`"]}`),
			criContainer("c9", "p9", "app", 1, `{"example.com/widget":[7]}`),
			noUID,
			criContainer("ok", "pok", "app", 1, w0)},
			want: []string{"pok/app/example.com/widget=w0"},
			wantProblems: []string{
				"container c1 (pod p1, container app): annotation berth.dev/devices: not a JSON object",
				"container c2 (pod p2, container app): annotation berth.dev/devices: no resource",
				`container c3 (pod p3, container app): annotation berth.dev/devices: resource "cpu" is not an extended resource name`,
				"container c4 (pod p4, container app): annotation berth.dev/devices: resource example.com/widget: no device ID",
				"container c5 (pod p5, container app): annotation berth.dev/devices: resource example.com/widget: an empty device ID",
				`container c6 (pod p6, container app): annotation berth.dev/devices: resource example.com/widget: device "w0" listed twice`,
				"container c7 (pod p7, container app): annotation berth.dev/devices: not a JSON object",
				"container c8 (pod p8, container app): annotation berth.dev/devices: 65563 bytes, more than the 65536 berth reads",
				"container c9 (pod p9, container app): annotation berth.dev/devices: not a JSON object",
				"container n: annotation berth.dev/devices: no pod UID or container name label",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, problems := rebuildFromContainers(tt.containers)
			var got []string
			for _, e := range entries {
				got = append(got, entryText(e))
				if e.AllocResp != nil {
					t.Errorf("entry %s has a response", entryText(e))
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("entries = %q, want %q", got, tt.want)
			}
			if len(problems) != len(tt.wantProblems) {
				t.Fatalf("problems = %q, want %d", problems, len(tt.wantProblems))
			}
			for i, want := range tt.wantProblems {
				if !strings.Contains(problems[i], want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, problems[i], want)
				}
			}
		})
	}
}

func TestDevicesAnnotationRoundTrip(t *testing.T) {
	in := map[string][]string{"example.com/widget": {"w0", "w1"}, "vendor.com/gpu": {"GPU-1,2", `odd "id"`}}
	value := (&DeviceRunContainerOptions{DeviceIDs: in}).AnnotationValue()
	got, err := parseDevicesAnnotation(value)
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Errorf("parse(%s) = %v, %v; want %v", value, got, err, in)
	}
	if v := (&DeviceRunContainerOptions{}).AnnotationValue(); v != "" {
		t.Errorf("no devices: annotation %q", v)
	}
	if v := (*DeviceRunContainerOptions)(nil).AnnotationValue(); v != "" {
		t.Errorf("nil options: annotation %q", v)
	}
}

// fakeRuntime lists a fixed set of containers.
type fakeRuntime struct {
	containers []*runtimeapi.Container
	err        error
}

func (f *fakeRuntime) ListContainers(ctx context.Context, _ *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return f.containers, f.err
}

// When the checkpoint is lost, the devices a running container holds are
// recovered from the runtime: they are never handed to another pod, the
// container gets the plugin's answer again when it is next created, and a
// new checkpoint records them.
func TestLostCheckpointIsRecoveredFromTheRuntime(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, path string)
		corrupt bool
	}{
		{"missing", func(t *testing.T, path string) {}, false},
		{"corrupt", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(`{"Data":{},"Checksum":1}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"directory", func(t *testing.T, path string) {
			if err := os.MkdirAll(filepath.Join(path, "inside"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortDir(t)
			path := filepath.Join(dir, checkpoint.FileName)
			tc.damage(t, path)
			rt := &fakeRuntime{containers: []*runtimeapi.Container{
				criContainer("c-a", "a", "c0", 1, `{"example.com/widget":["w0"]}`),
				criContainer("c-gone", "gone", "c0", 1, `{"example.com/widget":["w1"]}`),
			}}
			m, err := startManagerWith(t, dir, rt)
			if err != nil {
				t.Fatal(err)
			}
			if m.events.has(ReasonCheckpointCorrupt) != tc.corrupt {
				t.Errorf("%s event: %v, want %v (%q)", ReasonCheckpointCorrupt, !tc.corrupt, tc.corrupt, m.events.events)
			}
			if moved, _ := filepath.Glob(path + ".corrupt-*"); (len(moved) == 1) != tc.corrupt {
				t.Errorf("quarantined: %v", moved)
			}
			if !m.events.has(ReasonAllocationsRecovered) {
				t.Errorf("no %s event: %q", ReasonAllocationsRecovered, m.events.events)
			}
			if got := held(m.Manager, "a"); !slices.Equal(got, []string{"w0"}) {
				t.Errorf("pod a holds %v, want [w0]", got)
			}
			data, err := checkpoint.Read(dir)
			if err != nil {
				t.Fatalf("no new checkpoint: %v", err)
			}
			if entries, _, _, err := checkpoint.Decode(data); err != nil || len(entries) != 2 {
				t.Errorf("new checkpoint entries = %+v (%v)", entries, err)
			}

			p := startPlugin(t, deviceplugin.Config{Dir: dir, Devices: widgets("w0", "w1", "w2", "w3")})
			eventually(t, "widgets are allocatable", func() bool { return allocatable(m.Manager, widget) == 4 })
			// The pod that is gone is freed at the next admission; a's w0 is not.
			m.pods.end("gone")
			b := podWith("b", 2)
			if err := m.Admit(t.Context(), b); err != nil {
				t.Fatal(err)
			}
			if got := held(m.Manager, "b"); !slices.Equal(got, []string{"w1", "w2"}) {
				t.Errorf("pod b holds %v, want [w1 w2]", got)
			}
			if err := m.Admit(t.Context(), podWith("c", 2)); err == nil {
				t.Errorf("pod c was given two of one free widget: %v", held(m.Manager, "c"))
			}

			// a's container is created again: the plugin is asked about w0.
			a := podWith("a", 1)
			opts, err := m.ContainerOptions(t.Context(), a, &a.Spec.Containers[0])
			if err != nil {
				t.Fatal(err)
			}
			if len(opts.Envs) != 1 || string(opts.Envs[0].Value) != "w0" || len(opts.Devices) != 1 {
				t.Errorf("pod a's options = %v", opts)
			}
			last := p.Calls().Allocate[len(p.Calls().Allocate)-1]
			if !slices.Equal(last.ContainerRequests[0].DevicesIds, []string{"w0"}) {
				t.Errorf("last Allocate = %v, want w0 again", last)
			}

			// What was written reads back, and agrees with the runtime once
			// the container of the pod that is gone is removed.
			m.stop()
			m2, err := startManagerWith(t, dir, &fakeRuntime{containers: rt.containers[:1]})
			if err != nil {
				t.Fatal(err)
			}
			if got := held(m2.Manager, "a"); !slices.Equal(got, []string{"w0"}) ||
				m2.events.has(ReasonCheckpointCorrupt) || m2.events.has(ReasonCheckpointStale) || m2.events.has(ReasonAllocationsRecovered) {
				t.Errorf("after a restart pod a holds %v; events %q", got, m2.events.events)
			}
		})
	}
}

// A runtime that cannot be listed stops the start: going on would hand out
// devices that running containers may hold.
func TestRecoveryNeedsTheRuntime(t *testing.T) {
	dir := shortDir(t)
	_, err := startManagerWith(t, dir, &fakeRuntime{err: errors.New("connection refused")})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Start = %v, want the runtime's error", err)
	}
}

func TestReconcile(t *testing.T) {
	entry := func(pod, ctr string, ids ...string) checkpoint.PodDevicesEntry {
		return checkpoint.PodDevicesEntry{PodUID: pod, ContainerName: ctr, ResourceName: widget,
			DeviceIDs: checkpoint.DevicesPerNUMA{nodeWithoutTopology: ids}}
	}
	withResp := func(e checkpoint.PodDevicesEntry) checkpoint.PodDevicesEntry {
		e.AllocResp = []byte{1}
		return e
	}
	tests := []struct {
		name           string
		saved, running []checkpoint.PodDevicesEntry
		want           []string
		wantResp       []bool
		wantCorrected  []string // substrings, in order
	}{
		{name: "nothing"},
		{name: "agreeing: the checkpoint's entry, with its response, is kept",
			saved: []checkpoint.PodDevicesEntry{withResp(entry("a", "app", "w1", "w0"))}, running: []checkpoint.PodDevicesEntry{entry("a", "app", "w0", "w1")},
			want: []string{"a/app/example.com/widget=w1,w0"}, wantResp: []bool{true}},
		{name: "not yet created, or gone: the checkpoint's entry is kept",
			saved: []checkpoint.PodDevicesEntry{withResp(entry("a", "app", "w0"))},
			want:  []string{"a/app/example.com/widget=w0"}, wantResp: []bool{true}},
		{name: "a pod the checkpoint lacks is taken from its container",
			saved: []checkpoint.PodDevicesEntry{withResp(entry("a", "app", "w0"))}, running: []checkpoint.PodDevicesEntry{entry("b", "app", "w1")},
			want: []string{"a/app/example.com/widget=w0", "b/app/example.com/widget=w1"}, wantResp: []bool{true, false},
			wantCorrected: []string{"pod b container app: example.com/widget [w1] is not in the checkpoint"}},
		{name: "other devices in the container: the container's kept",
			saved: []checkpoint.PodDevicesEntry{withResp(entry("a", "app", "w0"))}, running: []checkpoint.PodDevicesEntry{entry("a", "app", "w2")},
			want: []string{"a/app/example.com/widget=w2"}, wantResp: []bool{false},
			wantCorrected: []string{"pod a container app: example.com/widget is [w0] in the checkpoint but [w2] in its container"}},
		{name: "a device a pod that is gone holds in the checkpoint, another's container holds: dropped",
			saved:   []checkpoint.PodDevicesEntry{withResp(entry("gone", "app", "w0", "w3")), withResp(entry("all-held", "app", "w1"))},
			running: []checkpoint.PodDevicesEntry{entry("b", "app", "w0", "w1")},
			want:    []string{"b/app/example.com/widget=w0,w1", "gone/app/example.com/widget=w3"}, wantResp: []bool{false, true},
			wantCorrected: []string{"pod b container app: example.com/widget [w0 w1] is not in the checkpoint",
				"pod all-held container app: example.com/widget [w1] in the checkpoint are held by another pod's container; dropped",
				"pod gone container app: example.com/widget [w0] in the checkpoint are held by another pod's container; dropped"}},
		{name: "within a pod, a container not created yet may share its init container's device",
			saved:   []checkpoint.PodDevicesEntry{withResp(entry("a", "app", "w0"))},
			running: []checkpoint.PodDevicesEntry{entry("a", "init", "w0")},
			want:    []string{"a/app/example.com/widget=w0", "a/init/example.com/widget=w0"}, wantResp: []bool{true, false},
			wantCorrected: []string{"pod a container init"}},
		{name: "sorted by pod and container",
			running:       []checkpoint.PodDevicesEntry{entry("b", "z", "w1"), entry("b", "a", "w2"), entry("a", "x", "w0")},
			want:          []string{"a/x/example.com/widget=w0", "b/a/example.com/widget=w2", "b/z/example.com/widget=w1"},
			wantResp:      []bool{false, false, false},
			wantCorrected: []string{"pod b container z", "pod b container a", "pod a container x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			merged, corrected := reconcile(tt.saved, tt.running)
			var got []string
			var resp []bool
			for _, e := range merged {
				got = append(got, entryText(e))
				resp = append(resp, e.AllocResp != nil)
			}
			if !slices.Equal(got, tt.want) || !slices.Equal(resp, tt.wantResp) {
				t.Errorf("merged = %q (responses %v), want %q (%v)", got, resp, tt.want, tt.wantResp)
			}
			if len(corrected) != len(tt.wantCorrected) {
				t.Fatalf("corrected = %q, want %d", corrected, len(tt.wantCorrected))
			}
			for i, want := range tt.wantCorrected {
				if !strings.Contains(corrected[i], want) {
					t.Errorf("correction %d = %q, want it to contain %q", i, corrected[i], want)
				}
			}
		})
	}
}

// A valid checkpoint that is out of date (an older copy put back) does not
// hide the devices a running container holds: they are taken from the
// container, reported, and never handed to another pod (issue #19, found by
// make chaos with seed 20261127).
func TestStaleCheckpointGivesWayToTheRuntime(t *testing.T) {
	dir := shortDir(t)
	old, err := checkpoint.Encode([]checkpoint.PodDevicesEntry{{PodUID: "a", ContainerName: "c0", ResourceName: widget,
		DeviceIDs: checkpoint.DevicesPerNUMA{nodeWithoutTopology: {"w0"}}, AllocResp: []byte{}}}, map[string][]string{widget: {"w0", "w1", "w2"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Write(dir, old); err != nil {
		t.Fatal(err)
	}
	rt := &fakeRuntime{containers: []*runtimeapi.Container{
		criContainer("c-a", "a", "c0", 1, `{"example.com/widget":["w0"]}`),
		criContainer("c-b", "b", "c0", 2, `{"example.com/widget":["w1"]}`),
	}}
	m, err := startManagerWith(t, dir, rt)
	if err != nil {
		t.Fatal(err)
	}
	if !m.events.has(ReasonCheckpointStale) || m.events.has(ReasonCheckpointCorrupt) {
		t.Errorf("events = %q, want %s alone", m.events.events, ReasonCheckpointStale)
	}
	if got := held(m.Manager, "b"); !slices.Equal(got, []string{"w1"}) {
		t.Errorf("pod b holds %v, want [w1]", got)
	}
	startPlugin(t, deviceplugin.Config{Dir: dir, Devices: widgets("w0", "w1", "w2")})
	eventually(t, "widgets are allocatable", func() bool { return allocatable(m.Manager, widget) == 3 })
	if err := m.Admit(t.Context(), podWith("c", 1)); err != nil {
		t.Fatal(err)
	}
	if got := held(m.Manager, "c"); !slices.Equal(got, []string{"w2"}) {
		t.Errorf("pod c holds %v, want [w2], the one device no container holds", got)
	}
	data, err := checkpoint.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if entries, _, _, err := checkpoint.Decode(data); err != nil || len(entries) != 3 {
		t.Errorf("checkpoint entries after the correction = %+v (%v), want a, b and c", entries, err)
	}
}
