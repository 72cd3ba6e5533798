package devicemanager

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
)

// fakeClient is a plugin reached without gRPC, whose calls can be held
// until the test lets them go.
type fakeClient struct {
	// The calls it does not serve are nil and panic.
	pluginapi.DevicePluginClient

	// entered gets the name of each call as it starts; buffered.
	entered chan string
	// allocGate and preferGate, when not nil, hold Allocate and
	// GetPreferredAllocation until closed. A call reads its gate before it
	// says it entered, so a test may change the gate once it knows.
	allocGate, preferGate chan struct{}
	// prefer answers GetPreferredAllocation: by default, the lowest IDs.
	prefer func(available []string, size int) []string

	mu     sync.Mutex
	allocs [][]string
}

func newFakeClient() *fakeClient {
	return &fakeClient{entered: make(chan string, 64)}
}

func (f *fakeClient) wait(ctx context.Context, gate chan struct{}) error {
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeClient) GetPreferredAllocation(ctx context.Context, in *pluginapi.PreferredAllocationRequest, _ ...grpc.CallOption) (*pluginapi.PreferredAllocationResponse, error) {
	gate := f.preferGate
	f.entered <- "GetPreferredAllocation"
	if err := f.wait(ctx, gate); err != nil {
		return nil, err
	}
	req := in.ContainerRequests[0]
	ids := slices.Sorted(slices.Values(req.AvailableDeviceIDs))[:req.AllocationSize]
	if f.prefer != nil {
		ids = f.prefer(req.AvailableDeviceIDs, int(req.AllocationSize))
	}
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: ids}}}, nil
}

func (f *fakeClient) Allocate(ctx context.Context, in *pluginapi.AllocateRequest, _ ...grpc.CallOption) (*pluginapi.AllocateResponse, error) {
	gate := f.allocGate
	f.entered <- "Allocate"
	if err := f.wait(ctx, gate); err != nil {
		return nil, err
	}
	ids := in.ContainerRequests[0].DevicesIds
	f.mu.Lock()
	f.allocs = append(f.allocs, slices.Clone(ids))
	f.mu.Unlock()
	return &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{{
		Envs: map[string]string{"IDS": strings.Join(ids, ",")},
	}}}, nil
}

func (f *fakeClient) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest, ...grpc.CallOption) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// allocated returns the device lists Allocate was asked for.
func (f *fakeClient) allocated() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.allocs)
}

// awaitCall waits until a call named call starts, passing over others.
func (f *fakeClient) awaitCall(t *testing.T, call string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case got := <-f.entered:
			if got == call {
				return
			}
		case <-deadline:
			t.Fatalf("the plugin never got %s", call)
		}
	}
}

// newBareManager is a manager that is not started: its plugins are
// fakeClients added by addFake.
func newBareManager(t testing.TB, active func(types.UID) bool, events EventRecorder) *Manager {
	t.Helper()
	return New(Options{Dir: t.TempDir(), Clock: clocktesting.NewFakeClock(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)),
		Log: slog.New(slog.DiscardHandler), Events: events, Active: active})
}

// addFake connects f as the plugin of resource, with healthy devices ids.
func addFake(t testing.TB, m *Manager, resource string, f *fakeClient, preferred bool, ids ...string) *endpoint {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ep := &endpoint{resource: resource, socket: resource + ".sock", client: f, ctx: ctx, cancel: cancel,
		opts: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: preferred}}
	devs := map[string]*pluginapi.Device{}
	for _, id := range ids {
		devs[id] = &pluginapi.Device{ID: id, Health: pluginapi.Healthy}
	}
	m.mu.Lock()
	m.resources[resource] = &pluginResource{devices: devs, ep: ep, listed: true} // as after its first list
	m.mu.Unlock()
	return ep
}

// within runs f and fails the test if it does not return in a generous
// time: what it calls must not wait for a plugin call that is held.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s waited for a plugin call that is held", what)
	}
}

// Two pods planned from the same state, with the same advice from the
// plugin, still get different devices: the second to reserve plans again
// around the device the first took.
func TestConcurrentAdmissionsGetDifferentDevices(t *testing.T) {
	m := newBareManager(t, nil, nil)
	f := newFakeClient()
	f.preferGate = make(chan struct{})
	f.prefer = func([]string, int) []string { return []string{"w0"} }
	addFake(t, m, widget, f, true, "w0", "w1", "w2")

	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, uid := range []string{"a", "b"} {
		wg.Go(func() { errs[i] = m.Admit(t.Context(), podWith(uid, 1)) })
	}
	// Both have read the state and asked; neither has reserved.
	f.awaitCall(t, "GetPreferredAllocation")
	f.awaitCall(t, "GetPreferredAllocation")
	close(f.preferGate)
	wg.Wait()

	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("admissions: %v", errs)
	}
	a, b := held(m, "a"), held(m, "b")
	if len(a) != 1 || len(b) != 1 || a[0] == b[0] || !sets.New(a[0], b[0]).Equal(sets.New("w0", "w1")) {
		t.Errorf("pod a holds %v, pod b %v; want w0 and w1, one each", a, b)
	}
	asked := sets.New[string]()
	for _, ids := range f.allocated() {
		for _, id := range ids {
			if asked.Has(id) {
				t.Errorf("Allocate was asked for %s twice: %v", id, f.allocated())
			}
			asked.Insert(id)
		}
	}
	if len(m.reserved) != 0 || len(m.inflight) != 0 {
		t.Errorf("reservations left behind: %v %v", m.reserved, m.inflight)
	}
}

// A plugin that does not answer holds up the pods that need its resource,
// not those of other resources, the Active check, or the readers.
func TestBlockedPluginBlocksOnlyItsOwnResource(t *testing.T) {
	for _, call := range []string{"Allocate", "GetPreferredAllocation"} {
		t.Run(call, func(t *testing.T) {
			var activeMu sync.Mutex
			var asked []types.UID
			m := newBareManager(t, func(uid types.UID) bool {
				activeMu.Lock()
				defer activeMu.Unlock()
				asked = append(asked, uid)
				return true
			}, nil)
			slow, fast := newFakeClient(), newFakeClient()
			gate := make(chan struct{})
			if call == "Allocate" {
				slow.allocGate = gate
			} else {
				slow.preferGate = gate
			}
			addFake(t, m, widget, slow, true, "w0", "w1", "w2")
			addFake(t, m, gadget, fast, false, "g0")

			stuck := make(chan error, 1)
			go func() { stuck <- m.Admit(t.Context(), podWith("slow", 1)) }()
			slow.awaitCall(t, call)

			other := podWithResource("fast", gadget, 1)
			within(t, "admitting a pod of another resource", func() {
				if err := m.Admit(t.Context(), other); err != nil {
					t.Errorf("admitting the other pod: %v", err)
				}
			})
			// Not by waiting for the held one to give up (GetPreferredAllocation
			// times out, and its pod goes on without advice).
			select {
			case err := <-stuck:
				t.Fatalf("the other pod was admitted only once the held one was (%v)", err)
			default:
			}
			within(t, "the other pod's container options", func() {
				if _, err := m.ContainerOptions(t.Context(), other, &other.Spec.Containers[0]); err != nil {
					t.Errorf("container options: %v", err)
				}
			})
			within(t, "the Active check", m.UpdateAllocatedDevices)
			within(t, "the readers", func() { m.Capacity(); m.Resources(); m.Allocations(); m.GetAllocatableDevices() })
			activeMu.Lock()
			if !slices.Contains(asked, "fast") {
				t.Errorf("Active was asked about %v, want pod fast", asked)
			}
			activeMu.Unlock()
			if got := held(m, "fast"); !slices.Equal(got, []string{"g0"}) {
				t.Errorf("pod fast holds %v", got)
			}

			close(gate)
			if err := <-stuck; err != nil {
				t.Fatalf("the held pod: %v", err)
			}
			if got := held(m, "slow"); !slices.Equal(got, []string{"w0"}) {
				t.Errorf("pod slow holds %v", got)
			}
		})
	}
}

func podWithResource(uid, resource string, n int64) *v1.Pod {
	pod := podWith(uid)
	pod.Spec.Containers = []v1.Container{ctr("c0", map[string]int64{resource: n})}
	return pod
}

// lockChecker is an Active callback and an event recorder that note each
// call made while the manager's lock is held. Nothing else holds it in
// these tests (no plugin streams), so a lock that cannot be taken is the
// caller's.
type lockChecker struct {
	m          *Manager
	mu         sync.Mutex
	calls      []string
	underLock  []string
	activeUIDs map[types.UID]bool
}

func (c *lockChecker) note(what string) {
	free := c.m.mu.TryLock()
	if free {
		c.m.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, what)
	if !free {
		c.underLock = append(c.underLock, what)
	}
}

func (c *lockChecker) active(uid types.UID) bool {
	c.note("Active(" + string(uid) + ")")
	return !c.activeUIDs[uid]
}
func (c *lockChecker) Event(_ *v1.Pod, _, reason, _ string) { c.note("Event " + reason) }
func (c *lockChecker) NodeEvent(_, reason, _ string)        { c.note("NodeEvent " + reason) }

// Active and the event recorder belong to other packages, which take their
// own locks: the manager never calls them while it holds its own.
func TestNoCallbackUnderTheLock(t *testing.T) {
	c := &lockChecker{activeUIDs: map[types.UID]bool{}}
	m := newBareManager(t, c.active, c)
	c.m = m
	m.runtime = &fakeRuntime{containers: []*runtimeapi.Container{
		criContainer("c", "recovered", "app", 1, `{"example.com/widget":["w3"]}`)}}
	if err := m.restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	f := newFakeClient()
	ep := addFake(t, m, widget, f, false, "w0", "w1", "w2", "w3")

	if err := m.Admit(t.Context(), podWith("a", 1)); err != nil {
		t.Fatal(err)
	}
	c.activeUIDs["recovered"] = true
	if err := m.Admit(t.Context(), podWith("b", 1)); err != nil {
		t.Fatal(err)
	}
	// Two resources whose answers conflict: an event about the pod.
	addFake(t, m, gadget, newFakeClient(), false, "g0")
	pod := podWith("c")
	pod.Spec.Containers = []v1.Container{ctr("c0", map[string]int64{widget: 1, gadget: 1})}
	if _, err := m.ContainerOptions(t.Context(), pod, &pod.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	m.updateDevices(ep, []*pluginapi.Device{{ID: "w0"}})
	m.disconnected(ep, context.Canceled)

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, want := range []string{"Active(recovered)", "NodeEvent " + ReasonAllocationsRecovered, "Event " + ReasonConflictingOptions,
		"NodeEvent " + ReasonInvalidDeviceList, "NodeEvent " + ReasonPluginDisconnected} {
		if !slices.Contains(c.calls, want) {
			t.Errorf("no call %s: %v", want, c.calls)
		}
	}
	if len(c.underLock) > 0 {
		t.Errorf("called with the manager's lock held: %v", c.underLock)
	}
}

// A checkpoint snapshot that reaches the file after a newer one does not
// overwrite it.
func TestOlderSnapshotNeverOverwritesANewerOne(t *testing.T) {
	m := newBareManager(t, nil, nil)
	m.mu.Lock()
	m.pods.insert("a", "c0", widget, checkpoint.DevicesPerNUMA{nodeWithoutTopology: {"w0"}}, &pluginapi.ContainerAllocateResponse{})
	older := m.snapshotLocked()
	m.pods.insert("b", "c0", widget, checkpoint.DevicesPerNUMA{nodeWithoutTopology: {"w1"}}, &pluginapi.ContainerAllocateResponse{})
	newer := m.snapshotLocked()
	m.mu.Unlock()

	if err := m.writeCheckpoint(newer); err != nil {
		t.Fatal(err)
	}
	if err := m.writeCheckpoint(older); err != nil {
		t.Fatal(err)
	}
	data, err := checkpoint.Read(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, _, _, err := checkpoint.Decode(data)
	if err != nil || len(entries) != 2 {
		t.Errorf("the checkpoint has %+v (%v), want the newer snapshot's two entries", entries, err)
	}
}

// What changes between the plan and the reservation is planned around on
// the state of the moment, with the advice already given; what can no
// longer be satisfied fails as it would have at first.
func TestChangesWhilePlanningArePlannedAround(t *testing.T) {
	for _, tc := range []struct {
		name     string
		change   func(m *Manager, ep *endpoint)
		want     []string
		wantErr  string
		notReady bool
	}{{
		name: "the preferred device went unhealthy",
		change: func(m *Manager, ep *endpoint) {
			m.updateDevices(ep, []*pluginapi.Device{{ID: "w0", Health: pluginapi.Unhealthy},
				{ID: "w1", Health: pluginapi.Healthy}, {ID: "w2", Health: pluginapi.Healthy}})
		},
		want: []string{"w1"},
	}, {
		name: "the preferred device was taken",
		change: func(m *Manager, ep *endpoint) {
			m.mu.Lock()
			m.pods.insert("other", "c0", widget, checkpoint.DevicesPerNUMA{nodeWithoutTopology: {"w0"}}, &pluginapi.ContainerAllocateResponse{})
			m.mu.Unlock()
		},
		want: []string{"w1"},
	}, {
		name: "too few devices are left",
		change: func(m *Manager, ep *endpoint) {
			m.updateDevices(ep, []*pluginapi.Device{{ID: "w0", Health: pluginapi.Unhealthy}})
		},
		wantErr: "requested number of devices unavailable for example.com/widget. Requested: 1, Available: 0",
	}, {
		name:     "the plugin went away",
		change:   func(m *Manager, ep *endpoint) { m.disconnected(ep, context.Canceled) },
		notReady: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m := newBareManager(t, nil, nil)
			f := newFakeClient()
			f.preferGate = make(chan struct{})
			f.prefer = func([]string, int) []string { return []string{"w0"} }
			ep := addFake(t, m, widget, f, true, "w0", "w1", "w2")

			done := make(chan error, 1)
			go func() { done <- m.Admit(t.Context(), podWith("a", 1)) }()
			f.awaitCall(t, "GetPreferredAllocation")
			tc.change(m, ep)
			close(f.preferGate)
			err := <-done

			var nr *NotReadyError
			switch {
			case tc.notReady:
				if !errors.As(err, &nr) || !nr.Known {
					t.Fatalf("err = %v, want a NotReadyError for a known resource", err)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			}
			if got := held(m, "a"); !slices.Equal(got, tc.want) {
				t.Errorf("pod a holds %v, want %v", got, tc.want)
			}
			if got := f.allocated(); tc.want != nil && (len(got) != 1 || !slices.Equal(got[0], tc.want)) {
				t.Errorf("Allocate was asked for %v, want %v once", got, tc.want)
			}
			if len(m.reserved) != 0 || len(m.inflight) != 0 {
				t.Errorf("reservations left behind: %v %v", m.reserved, m.inflight)
			}
		})
	}
}

// The devices an allocation in flight asks its plugin for are not given
// to anyone else meanwhile, and are free again if the plugin says no.
func TestReservedDevicesAreNotGivenMeanwhile(t *testing.T) {
	m := newBareManager(t, nil, nil)
	f := newFakeClient()
	f.allocGate = make(chan struct{})
	addFake(t, m, widget, f, false, "w0", "w1")

	ctx, cancel := context.WithCancel(t.Context())
	held0 := make(chan error, 1)
	go func() { held0 <- m.Admit(ctx, podWith("a", 1)) }()
	f.awaitCall(t, "Allocate")

	f.allocGate = nil // the next call is answered at once
	if err := m.Admit(t.Context(), podWith("b", 1)); err != nil {
		t.Fatal(err)
	}
	if got := held(m, "b"); !slices.Equal(got, []string{"w1"}) {
		t.Errorf("pod b holds %v, want [w1]: w0 is reserved for pod a", got)
	}
	if err := m.Admit(t.Context(), podWith("c", 1)); err == nil {
		t.Errorf("pod c was admitted with every device held or reserved: %v", held(m, "c"))
	}

	cancel() // pod a's Allocate fails: w0 is free again
	if err := <-held0; err == nil {
		t.Fatal("pod a's admission succeeded with its Allocate cancelled")
	}
	if err := m.Admit(t.Context(), podWith("c", 1)); err != nil {
		t.Fatal(err)
	}
	if got := held(m, "c"); !slices.Equal(got, []string{"w0"}) {
		t.Errorf("pod c holds %v, want [w0]", got)
	}
}

// A pod planned while its resource's plugin has registered and not listed
// its devices yet waits for the list, as for a plugin not connected,
// rather than being refused for too few devices; once the list is in it
// gets its device.
func TestUnlistedPluginIsWaitedFor(t *testing.T) {
	m := newBareManager(t, nil, nil)
	ep := addFake(t, m, widget, newFakeClient(), false)
	m.mu.Lock()
	m.resources[widget].listed = false // registered, no ListAndWatch answer yet
	m.mu.Unlock()
	var nr *NotReadyError
	if err := m.Admit(t.Context(), podWith("a", 1)); !errors.As(err, &nr) || !nr.Unlisted || nr.Resource != widget {
		t.Fatalf("before the list: err = %v, want a NotReadyError for an unlisted plugin", err)
	}
	m.updateDevices(ep, []*pluginapi.Device{{ID: "w0", Health: pluginapi.Healthy}})
	if err := m.Admit(t.Context(), podWith("a", 1)); err != nil {
		t.Fatalf("after the list: %v", err)
	}
}
