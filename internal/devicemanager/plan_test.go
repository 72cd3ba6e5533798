package devicemanager

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
)

const gadget = "example.com/gadget"

// ctr is a container asking for n devices of each resource.
func ctr(name string, limits map[string]int64) v1.Container {
	c := v1.Container{Name: name, Resources: v1.ResourceRequirements{Limits: v1.ResourceList{}}}
	for r, n := range limits {
		c.Resources.Limits[v1.ResourceName(r)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return c
}

func sidecar(c v1.Container) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

// plugin is a resource with a connected plugin that listed its devices.
func plugin(preferred bool, healthy []string, inUse ...string) resourceState {
	return resourceState{connected: true, listed: true, preferred: preferred, healthy: sets.New(healthy...), inUse: sets.New(inUse...)}
}

var w4 = []string{"w0", "w1", "w2", "w3"}

// planCase is a pod to plan for, on a state, with the plugin's advice.
type planCase struct {
	name      string
	resources map[string]resourceState
	held      map[string]map[string][]string // container → resource → devices
	init, app []v1.Container
	advice    map[stepKey][]string
	want      []allocStep
	wantAsked []adviceQuery
	wantErr   string
	notReady  *NotReadyError
}

var planCases = []planCase{{
	name:      "free devices in ID order",
	resources: map[string]resourceState{widget: plugin(false, w4, "w0")},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 2})},
	want:      []allocStep{{"app", widget, []string{"w1", "w2"}}},
}, {
	name:      "the plugin's preference first",
	resources: map[string]resourceState{widget: plugin(true, w4, "w0")},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 2})},
	advice:    map[stepKey][]string{{"app", widget}: {"w3", "w2"}},
	want:      []allocStep{{"app", widget, []string{"w3", "w2"}}},
	wantAsked: []adviceQuery{{container: "app", resource: widget, available: []string{"w1", "w2", "w3"}, size: 2}},
}, {
	name:      "a short or wrong preference is completed in ID order",
	resources: map[string]resourceState{widget: plugin(true, w4, "w0")},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 2})},
	advice:    map[stepKey][]string{{"app", widget}: {"w0", "w9", "w3"}},
	want:      []allocStep{{"app", widget, []string{"w3", "w1"}}},
	wantAsked: []adviceQuery{{container: "app", resource: widget, available: []string{"w1", "w2", "w3"}, size: 2}},
}, {
	name:      "no question without a choice",
	resources: map[string]resourceState{widget: plugin(true, w4, "w0", "w1")},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 2})},
	want:      []allocStep{{"app", widget, []string{"w2", "w3"}}},
}, {
	name:      "unhealthy devices and devices in use or reserved are not chosen",
	resources: map[string]resourceState{widget: plugin(false, []string{"w0", "w2", "w3", "w5"}, "w2", "w5")},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 2})},
	want:      []allocStep{{"app", widget, []string{"w0", "w3"}}},
}, {
	name:      "one container's devices are not the next one's",
	resources: map[string]resourceState{widget: plugin(false, w4)},
	app:       []v1.Container{ctr("a", map[string]int64{widget: 1}), ctr("b", map[string]int64{widget: 1})},
	want:      []allocStep{{"a", widget, []string{"w0"}}, {"b", widget, []string{"w1"}}},
}, {
	name:      "an init container's devices are reused after it; a sidecar keeps its own",
	resources: map[string]resourceState{widget: plugin(false, []string{"w0", "w1", "w2"})},
	init:      []v1.Container{ctr("setup", map[string]int64{widget: 2}), sidecar(ctr("sidecar", map[string]int64{widget: 1}))},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 2})},
	want: []allocStep{{"setup", widget, []string{"w0", "w1"}}, {"sidecar", widget, []string{"w0"}},
		{"app", widget, []string{"w1", "w2"}}},
}, {
	name:      "reused devices are offered to the plugin as ones it must include",
	resources: map[string]resourceState{widget: plugin(true, w4)},
	init:      []v1.Container{ctr("setup", map[string]int64{widget: 1})},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 2})},
	advice:    map[stepKey][]string{{"setup", widget}: {"w2"}, {"app", widget}: {"w3", "w2"}},
	want:      []allocStep{{"setup", widget, []string{"w2"}}, {"app", widget, []string{"w2", "w3"}}},
	wantAsked: []adviceQuery{
		{container: "setup", resource: widget, available: w4, size: 1},
		{container: "app", resource: widget, available: w4, mustInclude: []string{"w2"}, size: 2},
	},
}, {
	name:      "a restarted container keeps what it holds, even unhealthy",
	resources: map[string]resourceState{widget: plugin(false, w4, "w5")},
	held:      map[string]map[string][]string{"app": {widget: {"w5"}}},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 1})},
}, {
	name:      "a held init container's devices are reused",
	resources: map[string]resourceState{widget: plugin(false, w4, "w1")},
	held:      map[string]map[string][]string{"setup": {widget: {"w1"}}},
	init:      []v1.Container{ctr("setup", map[string]int64{widget: 1})},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 2})},
	want:      []allocStep{{"app", widget, []string{"w1", "w0"}}},
}, {
	name:      "a changed request fails",
	resources: map[string]resourceState{widget: plugin(false, w4, "w0", "w1")},
	held:      map[string]map[string][]string{"app": {widget: {"w0", "w1"}}},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 1})},
	wantErr:   "container app changed its request for example.com/widget from 2 to 1",
}, {
	name:      "resources in name order",
	resources: map[string]resourceState{widget: plugin(false, w4), gadget: plugin(false, []string{"g0"})},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 1, gadget: 1})},
	want:      []allocStep{{"app", gadget, []string{"g0"}}, {"app", widget, []string{"w0"}}},
}, {
	name:     "a resource never seen is not ready",
	app:      []v1.Container{ctr("app", map[string]int64{widget: 1})},
	notReady: &NotReadyError{Resource: widget},
}, {
	name:      "a resource whose plugin is gone is not ready",
	resources: map[string]resourceState{widget: {healthy: sets.New[string](), inUse: sets.New[string]()}},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 1})},
	notReady:  &NotReadyError{Resource: widget, Known: true},
}, {
	name:      "a resource whose plugin has not listed its devices yet is not ready",
	resources: map[string]resourceState{widget: {connected: true, healthy: sets.New[string](), inUse: sets.New[string]()}},
	app:       []v1.Container{ctr("app", map[string]int64{widget: 1})},
	notReady:  &NotReadyError{Resource: widget, Known: true, Unlisted: true},
}, {
	name:      "too few devices, for any container, fail the whole pod",
	resources: map[string]resourceState{widget: plugin(false, w4, "w0", "w1")},
	app:       []v1.Container{ctr("a", map[string]int64{widget: 1}), ctr("b", map[string]int64{widget: 2})},
	wantErr:   "requested number of devices unavailable for example.com/widget. Requested: 2, Available: 1",
}}

func TestPlanPod(t *testing.T) {
	for _, tc := range planCases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}, Spec: v1.PodSpec{InitContainers: tc.init, Containers: tc.app}}
			st := allocState{uid: "p", resources: tc.resources, held: containerDevices{}}
			for c, rs := range tc.held {
				st.held[c] = resourceAllocateInfo{}
				for r, ids := range rs {
					st.held[c][r] = deviceAllocateInfo{deviceIDs: checkpoint.DevicesPerNUMA{nodeWithoutTopology: ids}}
				}
			}
			before := cloneState(st)
			var asked []adviceQuery
			steps, err := planPod(st, podContainers(pod), func(q adviceQuery) []string {
				asked = append(asked, q)
				return tc.advice[stepKey{q.container, q.resource}]
			})
			var nr *NotReadyError
			switch {
			case tc.notReady != nil:
				if !errors.As(err, &nr) || *nr != *tc.notReady {
					t.Fatalf("err = %v, want %+v", err, tc.notReady)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			}
			if !reflect.DeepEqual(steps, tc.want) {
				t.Errorf("steps = %+v\nwant    %+v", steps, tc.want)
			}
			if tc.wantErr == "" && tc.notReady == nil && !reflect.DeepEqual(asked, tc.wantAsked) {
				t.Errorf("asked = %+v\nwant    %+v", asked, tc.wantAsked)
			}
			if !reflect.DeepEqual(st, before) {
				t.Errorf("planPod changed its input:\n%+v\nwas %+v", st, before)
			}
		})
	}
}

// cloneState copies st deeply enough to tell whether planPod changed it.
func cloneState(st allocState) allocState {
	out := allocState{uid: st.uid, resources: map[string]resourceState{}, held: containerDevices{}}
	for name, r := range st.resources {
		r.healthy, r.inUse = r.healthy.Clone(), r.inUse.Clone()
		out.resources[name] = r
	}
	if st.resources == nil {
		out.resources = nil
	}
	for c, rs := range st.held {
		out.held[c] = resourceAllocateInfo{}
		for r, info := range rs {
			ids := checkpoint.DevicesPerNUMA{}
			for n, devs := range info.deviceIDs {
				ids[n] = append([]string(nil), devs...)
			}
			out.held[c][r] = deviceAllocateInfo{deviceIDs: ids, allocResp: info.allocResp}
		}
	}
	return out
}

func TestPodContainers(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{ctr("setup", map[string]int64{widget: 1}), sidecar(ctr("side", nil))},
		Containers:     []v1.Container{ctr("app", map[string]int64{widget: 2, gadget: 1, "cpu": 1})},
	}}
	got := podContainers(pod)
	want := []planContainer{
		{name: "setup", role: roleInit, requests: []deviceRequest{{widget, 1}}},
		{name: "side", role: roleSidecar},
		{name: "app", role: roleApp, requests: []deviceRequest{{gadget, 1}, {widget, 2}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("podContainers = %+v\nwant %+v", got, want)
	}

	// The scheduler allocated app's widgets through the pod's extended
	// resource claim: a DRA driver's, not a device plugin's.
	pod.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{
		ResourceClaimName: "extended",
		RequestMappings:   []v1.ContainerExtendedResourceRequest{{ContainerName: "app", ResourceName: widget, RequestName: "container-0-request-0"}},
	}
	want[2].requests = []deviceRequest{{gadget, 1}}
	if got := podContainers(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("podContainers with app's widgets backed by DRA = %+v\nwant %+v", got, want)
	}
}
