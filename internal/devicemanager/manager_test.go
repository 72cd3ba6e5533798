package devicemanager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
	"log/slog"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
	"github.com/berth-dev/berth/test/deviceplugin"
)

const widget = "example.com/widget"

// recorder keeps the events a test's manager records.
type recorder struct {
	mu     sync.Mutex
	events []string // "reason: message"
}

func (r *recorder) Event(pod *v1.Pod, _, reason, message string) {
	r.add(reason + ": " + message)
}
func (r *recorder) NodeEvent(_, reason, message string) { r.add(reason + ": " + message) }
func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}
func (r *recorder) has(reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.events, func(e string) bool { return strings.HasPrefix(e, reason+":") })
}

// activeSet is the Active callback: every pod is active unless ended.
type activeSet struct {
	mu    sync.Mutex
	ended map[types.UID]bool
}

func (a *activeSet) active(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.ended[uid]
}
func (a *activeSet) end(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended == nil {
		a.ended = map[types.UID]bool{}
	}
	a.ended[uid] = true
}

type testManager struct {
	*Manager
	clk    *clocktesting.FakeClock
	events *recorder
	pods   *activeSet
	stop   func()
}

// shortDir is a directory whose sockets fit in sun_path.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func startManager(t *testing.T, dir string) *testManager {
	t.Helper()
	tm, err := startManagerWith(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// startManagerWith starts a manager whose runtime lists rt's containers
// (none when rt is nil), and returns Start's error.
func startManagerWith(t *testing.T, dir string, rt ContainerLister) (*testManager, error) {
	t.Helper()
	tm := &testManager{clk: clocktesting.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)), events: &recorder{}, pods: &activeSet{}}
	tm.Manager = New(Options{Dir: dir, Clock: tm.clk, Log: slog.New(slog.DiscardHandler), Events: tm.events,
		Active: tm.pods.active, Runtime: rt})
	ctx, cancel := context.WithCancel(context.Background())
	if err := tm.Start(ctx); err != nil {
		cancel()
		return nil, err
	}
	var once sync.Once
	tm.stop = func() { once.Do(func() { cancel(); tm.Wait() }) }
	t.Cleanup(tm.stop)
	return tm, nil
}

func startPlugin(t *testing.T, cfg deviceplugin.Config) *deviceplugin.Plugin {
	t.Helper()
	if cfg.ResourceName == "" {
		cfg.ResourceName = widget
	}
	if cfg.SocketName == "" {
		cfg.SocketName = "widget.sock"
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	p, err := deviceplugin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func widgets(ids ...string) []deviceplugin.Device {
	var out []deviceplugin.Device
	for _, id := range ids {
		out = append(out, deviceplugin.Device{ID: id})
	}
	return out
}

// eventually polls cond: the manager's view follows the plugin's stream
// asynchronously.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkpointWritten waits until the checkpoint holds the manager's state
// as of now: a change is visible before the checkpoint write that follows
// it, as in the kubelet, since the file is written with no lock held.
func checkpointWritten(t *testing.T, m *Manager) {
	t.Helper()
	m.mu.Lock()
	want := m.snapshots
	m.mu.Unlock()
	eventually(t, "the checkpoint is written", func() bool {
		m.writeMu.Lock()
		defer m.writeMu.Unlock()
		return m.writtenSeq >= want
	})
}

func allocatable(m *Manager, name string) int64 {
	_, alloc := m.Capacity()
	q, ok := alloc[v1.ResourceName(name)]
	if !ok {
		return -1
	}
	return q.Value()
}

func podWith(uid string, counts ...int) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)}}
	for i, n := range counts {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
			Name:      "c" + string(rune('0'+i)),
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{widget: *resource.NewQuantity(int64(n), resource.DecimalSI)}},
		})
	}
	return pod
}

func held(m *Manager, uid string) []string {
	var out []string
	for _, a := range m.Allocations() {
		if a.PodUID == uid {
			out = append(out, a.DeviceIDs...)
		}
	}
	slices.Sort(out)
	return out
}

func TestRegistrationAndHealth(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startPlugin(t, deviceplugin.Config{Dir: dir, Devices: widgets("w0", "w1", "w2")})
	eventually(t, "3 widgets are allocatable", func() bool { return allocatable(m.Manager, widget) == 3 })

	p.SetHealth("w1", false)
	eventually(t, "an unhealthy widget is not allocatable", func() bool { return allocatable(m.Manager, widget) == 2 })
	capacity, _ := m.Capacity()
	if q := capacity[widget]; q.Value() != 3 {
		t.Errorf("capacity = %s, want 3: unhealthy devices still count", q.String())
	}
	// The checkpoint lists the healthy devices, as the kubelet's does.
	checkpointWritten(t, m.Manager)
	data, err := checkpoint.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, registered, _, err := checkpoint.Decode(data)
	if err != nil || !slices.Equal(registered[widget], []string{"w0", "w2"}) {
		t.Errorf("checkpoint registered devices = %v (%v), want [w0 w2]", registered, err)
	}

	// The stream breaks: the devices are unhealthy at once, and forgotten
	// after the grace period.
	p.Stop()
	eventually(t, "the devices of a plugin gone are unhealthy", func() bool { return allocatable(m.Manager, widget) == 0 })
	if !m.events.has(ReasonPluginDisconnected) {
		t.Errorf("no %s event: %v", ReasonPluginDisconnected, m.events.events)
	}
	m.clk.Step(endpointGracePeriod - time.Second)
	if allocatable(m.Manager, widget) != 0 {
		t.Errorf("the resource was forgotten before the grace period ended")
	}
	m.clk.Step(time.Second)
	if got := allocatable(m.Manager, widget); got != -1 {
		t.Errorf("after the grace period allocatable = %d, want the resource forgotten", got)
	}

	// It comes back: allocatable never sticks at 0 (kubernetes#62773).
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a plugin that came back restores its devices", func() bool { return allocatable(m.Manager, widget) == 2 })
}

func TestRegistrationRefused(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	for _, tc := range []struct {
		name string
		cfg  deviceplugin.Config
		want string
	}{
		{"old API version", deviceplugin.Config{RegisterVersion: "v1alpha"}, `version "v1alpha" is not supported`},
		{"native resource", deviceplugin.Config{ResourceName: "memory"}, `resource name "memory" is not an extended resource name`},
		{"kubernetes.io resource", deviceplugin.Config{ResourceName: "kubernetes.io/widget"}, "not an extended resource name"},
		{"endpoint outside the directory", deviceplugin.Config{RegisterEndpoint: "../elsewhere.sock"}, `endpoint "../elsewhere.sock" is not the name of a socket`},
		{"endpoint that does not answer", deviceplugin.Config{RegisterEndpoint: "nobody.sock"}, "does not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Dir, tc.cfg.Devices, tc.cfg.Logger = dir, widgets("w0"), slog.New(slog.DiscardHandler)
			if tc.cfg.ResourceName == "" {
				tc.cfg.ResourceName = widget
			}
			tc.cfg.SocketName = "refused.sock"
			p, err := deviceplugin.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = p.Start(t.Context())
			if err == nil {
				p.Stop()
				t.Fatal("registration accepted")
			}
			if tc.want != "does not answer" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
			if !m.events.has(ReasonPluginRefused) {
				t.Errorf("no %s event", ReasonPluginRefused)
			}
		})
	}
	if res := m.Resources(); len(res) != 0 {
		t.Errorf("refused plugins left resources: %+v", res)
	}
}

func TestAdmitAllocatesAndCheckpointsFirst(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startPlugin(t, deviceplugin.Config{Dir: dir, Devices: widgets("w0", "w1", "w2", "w3"),
		PreStartRequired: true, GetPreferredAllocationAvailable: true})
	eventually(t, "widgets are allocatable", func() bool { return allocatable(m.Manager, widget) == 4 })
	ctx := t.Context()

	a := podWith("a", 2)
	if err := m.Admit(ctx, a); err != nil {
		t.Fatal(err)
	}
	// The plugin prefers the lowest IDs.
	if got := held(m.Manager, "a"); !slices.Equal(got, []string{"w0", "w1"}) {
		t.Errorf("pod a holds %v", got)
	}
	data, err := checkpoint.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, _, _, err := checkpoint.Decode(data)
	if err != nil || len(entries) != 1 || entries[0].PodUID != "a" || !slices.Equal(entries[0].DeviceIDs[-1], []string{"w0", "w1"}) {
		t.Errorf("checkpoint entries = %+v (%v)", entries, err)
	}

	opts, err := m.ContainerOptions(ctx, a, &a.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Devices) != 2 || opts.Devices[0].ContainerPath != "/dev/w0" || len(opts.Envs) != 1 || string(opts.Envs[0].Value) != "w0,w1" {
		t.Errorf("container options = %v", opts)
	}
	if calls := p.Calls(); len(calls.PreStart) != 1 || !slices.Equal(calls.PreStart[0].DevicesIds, []string{"w0", "w1"}) {
		t.Errorf("PreStartContainer calls = %v", calls.PreStart)
	}

	// A second pod gets the other two; a third finds none free.
	if err := m.Admit(ctx, podWith("b", 2)); err != nil {
		t.Fatal(err)
	}
	if got := held(m.Manager, "b"); !slices.Equal(got, []string{"w2", "w3"}) {
		t.Errorf("pod b holds %v", got)
	}
	err = m.Admit(ctx, podWith("c", 1, 1))
	if err == nil || !strings.Contains(err.Error(), "requested number of devices unavailable for example.com/widget. Requested: 1, Available: 0") {
		t.Errorf("third pod: err = %v", err)
	}
	if got := held(m.Manager, "c"); got != nil {
		t.Errorf("a rejected pod holds %v", got)
	}

	// Pod a ends: its devices are free again.
	m.pods.end("a")
	m.UpdateAllocatedDevices()
	if err := m.Admit(ctx, podWith("c", 1, 1)); err != nil {
		t.Fatal(err)
	}
	if got := held(m.Manager, "c"); !slices.Equal(got, []string{"w0", "w1"}) {
		t.Errorf("pod c holds %v", got)
	}
	// Admitting again is a no-op: the pod keeps what it holds.
	before := len(p.Calls().Allocate)
	if err := m.Admit(ctx, podWith("c", 1, 1)); err != nil || len(p.Calls().Allocate) != before {
		t.Errorf("re-admission: err %v, Allocate calls %d -> %d", err, before, len(p.Calls().Allocate))
	}
}

func TestAdmitWithoutPlugin(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	err := m.Admit(t.Context(), podWith("a", 1))
	var nr *NotReadyError
	if !asNotReady(err, &nr) || nr.Resource != widget || nr.Known {
		t.Fatalf("err = %v, want a NotReadyError for a resource never seen", err)
	}
	// A pod without devices needs no plugin.
	if err := m.Admit(t.Context(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "x"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}); err != nil {
		t.Errorf("pod without devices: %v", err)
	}
	// Nor one whose extended resources the scheduler gave it through DRA.
	dra := podWith("b", 1)
	dra.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "extended",
		RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: dra.Spec.Containers[0].Name, ResourceName: widget, RequestName: "r"}}}
	if NeedsDevices(dra) {
		t.Error("a pod whose devices are DRA's needs devices")
	}
	if err := m.Admit(t.Context(), dra); err != nil {
		t.Errorf("pod whose extended resource DRA serves: %v", err)
	}
}

func TestAdmitPluginFailures(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startPlugin(t, deviceplugin.Config{Dir: dir, Devices: widgets("w0", "w1")})
	eventually(t, "widgets are allocatable", func() bool { return allocatable(m.Manager, widget) == 2 })

	p.FailAllocate("widget firmware on fire")
	err := m.Admit(t.Context(), podWith("a", 1))
	if err == nil || !strings.Contains(err.Error(), "widget firmware on fire") {
		t.Errorf("failed Allocate: err = %v", err)
	}
	p.FailAllocate("")
	p.ShortAllocate(true)
	err = m.Admit(t.Context(), podWith("a", 1))
	if err == nil || !strings.Contains(err.Error(), "0 container responses to 1 request") {
		t.Errorf("short Allocate: err = %v", err)
	}
	if got := m.Allocations(); len(got) != 0 {
		t.Errorf("failed admissions left allocations: %+v", got)
	}
	p.ShortAllocate(false)
	if err := m.Admit(t.Context(), podWith("a", 2)); err != nil {
		t.Errorf("after the plugin recovered: %v", err)
	}
}

func TestInitContainerDevicesAreReused(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	startPlugin(t, deviceplugin.Config{Dir: dir, Devices: widgets("w0", "w1", "w2")})
	eventually(t, "widgets are allocatable", func() bool { return allocatable(m.Manager, widget) == 3 })
	limit := func(n int64) v1.ResourceRequirements {
		return v1.ResourceRequirements{Limits: v1.ResourceList{widget: *resource.NewQuantity(n, resource.DecimalSI)}}
	}
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "p"}, Spec: v1.PodSpec{
		InitContainers: []v1.Container{
			{Name: "setup", Resources: limit(2)},
			{Name: "sidecar", Resources: limit(1), RestartPolicy: &always},
		},
		Containers: []v1.Container{{Name: "app", Resources: limit(2)}},
	}}
	if err := m.Admit(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, a := range m.Allocations() {
		got[a.Container] = a.DeviceIDs
	}
	// setup's devices are free once it is done: the sidecar takes one of
	// them and keeps it; app reuses the other and takes the last free one.
	want := map[string][]string{"setup": {"w0", "w1"}, "sidecar": {"w0"}, "app": {"w1", "w2"}}
	for c, ids := range want {
		if !slices.Equal(got[c], ids) {
			t.Errorf("%s holds %v, want %v", c, got[c], ids)
		}
	}
}

func TestRestartKeepsAllocations(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startPlugin(t, deviceplugin.Config{Dir: dir, Devices: widgets("w0", "w1", "w2")})
	eventually(t, "widgets are allocatable", func() bool { return allocatable(m.Manager, widget) == 3 })
	a := podWith("a", 2)
	if err := m.Admit(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	before, err := checkpoint.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.stop()

	m2 := startManager(t, dir)
	if got := held(m2.Manager, "a"); !slices.Equal(got, []string{"w0", "w1"}) {
		t.Errorf("after restart pod a holds %v", got)
	}
	// The restart removed the plugin's socket; it notices and comes back.
	if err := p.WaitRegistered(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the plugin re-registered", func() bool { return allocatable(m2.Manager, widget) == 3 })
	checkpointWritten(t, m2.Manager)
	after, err := checkpoint.Read(dir)
	if err != nil || string(after) != string(before) {
		t.Errorf("the checkpoint changed across a restart:\nbefore %s\nafter  %s", before, after)
	}
	// The same device is never given twice. The plugin may register more
	// than once as it notices the restart (its socket removed, then
	// kubelet.sock created), and a registration replaces the endpoint an
	// Allocate is talking to: the pod is admitted once that settles.
	eventually(t, "pod b admitted", func() bool { return m2.Admit(t.Context(), podWith("b", 1)) == nil })
	if got := held(m2.Manager, "b"); !slices.Equal(got, []string{"w2"}) {
		t.Errorf("pod b holds %v, want [w2]", got)
	}
	opts, err := m2.ContainerOptions(t.Context(), a, &a.Spec.Containers[0])
	if err != nil || len(opts.Devices) != 2 {
		t.Errorf("pod a's options after restart = %v, %v", opts, err)
	}
}

func TestCorruptCheckpointIsQuarantined(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, checkpoint.FileName)
	if err := os.WriteFile(path, []byte(`{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startManager(t, dir)
	if !m.events.has(ReasonCheckpointCorrupt) {
		t.Errorf("no %s event: %v", ReasonCheckpointCorrupt, m.events.events)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the corrupt checkpoint is still in place: %v", err)
	}
	moved, _ := filepath.Glob(path + ".corrupt-*")
	if len(moved) != 1 {
		t.Errorf("quarantined files = %v", moved)
	}
	if got := m.Allocations(); len(got) != 0 {
		t.Errorf("allocations from a corrupt checkpoint: %+v", got)
	}
}

func TestOldCheckpointIsConverted(t *testing.T) {
	dir := shortDir(t)
	old, err := os.ReadFile("../../../shared/testdata/checkpoint/v1_k8s113_testcheckpoint_full.json")
	if err != nil {
		t.Fatalf("test data (../shared beside the repo): %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.FileName), old, 0o600); err != nil {
		t.Fatal(err)
	}
	m := startManager(t, dir)
	if got := held(m.Manager, "pod1"); !slices.Equal(got, []string{"dev1", "dev1", "dev2", "dev2", "dev3"}) {
		t.Errorf("pod1 holds %v", got)
	}
	data, err := checkpoint.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, format, err := checkpoint.Decode(data); err != nil || format != checkpoint.FormatV2 {
		t.Errorf("the converted checkpoint reads as %v, %v; want the current format", format, err)
	}
}

func TestStaleSocketsAreRemoved(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startPlugin(t, deviceplugin.Config{Dir: dir, Devices: widgets("w0")})
	eventually(t, "registered", func() bool { return allocatable(m.Manager, widget) == 1 })
	m.stop()
	if _, err := os.Stat(filepath.Join(dir, KubeletSocket)); !os.IsNotExist(err) {
		t.Errorf("kubelet.sock outlived the manager: %v", err)
	}
	if _, err := os.Stat(p.SocketPath()); err != nil {
		t.Fatalf("plugin socket: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Stop() // a plugin that died and left its socket behind
	m2 := startManager(t, dir)
	if _, err := os.Stat(p.SocketPath()); !os.IsNotExist(err) {
		t.Errorf("a stale plugin socket survived the start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("a file that is not a socket was removed: %v", err)
	}
	_ = m2
}

func TestInvalidDeviceList(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startPlugin(t, deviceplugin.Config{Dir: dir, Devices: widgets("w0", "w1")})
	eventually(t, "registered", func() bool { return allocatable(m.Manager, widget) == 2 })
	p.SetDevices(widgets("w0", "w0"))
	eventually(t, "an invalid list makes the resource unhealthy", func() bool { return allocatable(m.Manager, widget) == 0 })
	if !m.events.has(ReasonInvalidDeviceList) {
		t.Errorf("no %s event", ReasonInvalidDeviceList)
	}
	if r := m.Resources(); len(r) != 1 || !strings.Contains(r[0].Problem, `device ID "w0" is listed twice`) {
		t.Errorf("resources = %+v", r)
	}
	p.SetDevices(widgets("w0", "w1", "w2"))
	eventually(t, "a valid list restores it", func() bool { return allocatable(m.Manager, widget) == 3 })
}

func TestValidateDevices(t *testing.T) {
	for _, tc := range []struct {
		devs []*pluginapi.Device
		want string
	}{
		{nil, ""},
		{[]*pluginapi.Device{{ID: "a", Health: pluginapi.Healthy}, {ID: "b", Health: pluginapi.Unhealthy}}, ""},
		{[]*pluginapi.Device{nil}, "device 0 is empty"},
		{[]*pluginapi.Device{{Health: pluginapi.Healthy}}, "device 0 has no ID"},
		{[]*pluginapi.Device{{ID: "a", Health: "Meh"}}, `device "a" has health "Meh"`},
	} {
		err := validateDevices(tc.devs)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("validateDevices(%v) = %v, want %q", tc.devs, err, tc.want)
		}
	}
}

func asNotReady(err error, target **NotReadyError) bool { return errors.As(err, target) }

func TestRegistrationSocketIsRootsAlone(t *testing.T) {
	dir := filepath.Join(shortDir(t), "plugins")
	startManager(t, dir)
	fi, err := os.Lstat(filepath.Join(dir, KubeletSocket))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("registration socket mode %v, want a socket with 0600", fi.Mode())
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", di.Mode().Perm())
	}
}

// A resource known from the checkpoint whose plugin has not registered
// since the restart: a new pod waits for it rather than being refused.
func TestAdmitWaitsForAKnownPlugin(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	p := startPlugin(t, deviceplugin.Config{Dir: dir, Devices: widgets("w0")})
	eventually(t, "widgets are allocatable", func() bool { return allocatable(m.Manager, widget) == 1 })
	p.Stop()
	m.stop()

	m2 := startManager(t, dir)
	var nr *NotReadyError
	if err := m2.Admit(t.Context(), podWith("b", 1)); !asNotReady(err, &nr) || nr.Resource != widget || !nr.Known {
		t.Errorf("err = %v, want a NotReadyError for a known resource", err)
	}
}

// A plugin that registered and has not sent its device list yet is
// connected but not listed: admission leaves its resource out until the
// list comes (agent's admissionDeviceResources).
func TestRegisteredPluginIsListedOnceItSendsItsDevices(t *testing.T) {
	m := New(Options{Dir: t.TempDir(), Log: slog.New(slog.DiscardHandler)})
	ep := &endpoint{resource: widget, socket: "widget.sock"}
	m.resources[widget] = &pluginResource{devices: map[string]*pluginapi.Device{}, ep: ep}
	if r := m.Resources(); len(r) != 1 || !r[0].Connected || r[0].Listed {
		t.Fatalf("before the list: %+v, want connected and not listed", r)
	}
	m.updateDevices(ep, []*pluginapi.Device{{ID: "w0", Health: pluginapi.Healthy}, {ID: "w1", Health: pluginapi.Healthy}})
	if r := m.Resources(); len(r) != 1 || !r[0].Listed || r[0].Allocatable != 2 {
		t.Errorf("after the list: %+v, want listed with 2 allocatable", r)
	}
}
