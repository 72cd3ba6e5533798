package dra

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// testPod is a pod in ns "default" with the given pod claims; status maps
// template claims to their generated names.
func testPod(uid string, claims []v1.PodResourceClaim, status map[string]string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-" + uid, Namespace: "default", UID: types.UID(uid)}}
	p.Spec.ResourceClaims = claims
	for n, g := range status {
		st := v1.PodResourceClaimStatus{Name: n}
		if g != "" {
			st.ResourceClaimName = ptr.To(g)
		}
		p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, st)
	}
	return p
}

func named(name, claim string) v1.PodResourceClaim {
	return v1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To(claim)}
}

func templated(name, tmpl string) v1.PodResourceClaim {
	return v1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(tmpl)}
}

// testClaim is an allocated claim reserved for the pods, with one result
// per driver (request "gpu").
func testClaim(name, uid string, drivers []string, reservedFor ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)}}
	alloc := &resourceapi.AllocationResult{}
	for _, d := range drivers {
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: d, Pool: "pool", Device: "dev-" + name})
	}
	if drivers != nil {
		c.Status.Allocation = alloc
	}
	for _, p := range reservedFor {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "pod-" + p, UID: types.UID(p)})
	}
	return c
}

func TestResolveClaims(t *testing.T) {
	tests := []struct {
		name    string
		pod     *v1.Pod
		want    []podClaim
		wantErr string
	}{
		{name: "none", pod: testPod("p1", nil, nil)},
		{
			name: "named and templated",
			pod:  testPod("p1", []v1.PodResourceClaim{named("a", "claim-a"), templated("b", "tmpl")}, map[string]string{"b": "pod-p1-b-xyz"}),
			want: []podClaim{{PodClaimName: "a", ClaimName: "claim-a"}, {PodClaimName: "b", ClaimName: "pod-p1-b-xyz", MustCheckOwner: true}},
		},
		{
			name: "template with no claim needed",
			pod:  testPod("p1", []v1.PodResourceClaim{templated("b", "tmpl")}, map[string]string{"b": ""}),
		},
		{
			name:    "template claim not created yet",
			pod:     testPod("p1", []v1.PodResourceClaim{templated("b", "tmpl")}, nil),
			wantErr: `pod "default/pod-p1": ResourceClaim not created yet`,
		},
		{
			name:    "neither field",
			pod:     testPod("p1", []v1.PodResourceClaim{{Name: "c"}}, nil),
			wantErr: `pod "default/pod-p1", spec.resourceClaim "c": none of the supported fields are set`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveClaims(tt.pod)
			if errString(err) != tt.wantErr {
				t.Fatalf("error %q, want %q", errString(err), tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestCheckClaim(t *testing.T) {
	pod := testPod("p1", nil, nil)
	owned := testClaim("gen", "u-gen", []string{"b.example.com", "a.example.com", "a.example.com"}, "p1")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	otherNS := owned.DeepCopy()
	otherNS.Namespace = "other"
	tests := []struct {
		name    string
		pc      podClaim
		claim   *resourceapi.ResourceClaim
		want    Claim
		wantErr string
	}{
		{
			name:  "reserved and allocated, drivers sorted once each",
			pc:    podClaim{ClaimName: "gen", MustCheckOwner: true},
			claim: owned,
			want:  Claim{Namespace: "default", Name: "gen", UID: "u-gen", Drivers: []string{"a.example.com", "b.example.com"}},
		},
		{
			name:    "generated claim not owned by the pod",
			pc:      podClaim{ClaimName: "c", MustCheckOwner: true},
			claim:   testClaim("c", "u-c", []string{"a.example.com"}, "p1"),
			wantErr: "ResourceClaim default/c was not created for Pod default/pod-p1 (Pod is not owner)",
		},
		{
			name:    "generated claim in another namespace",
			pc:      podClaim{ClaimName: "gen", MustCheckOwner: true},
			claim:   otherNS,
			wantErr: "ResourceClaim other/gen is not in the same namespace as Pod default/pod-p1",
		},
		{
			name:    "not reserved for the pod",
			pc:      podClaim{ClaimName: "c"},
			claim:   testClaim("c", "u-c", []string{"a.example.com"}, "p2"),
			wantErr: "pod pod-p1 (p1) is not allowed to use ResourceClaim c (u-c)",
		},
		{
			name:    "not allocated",
			pc:      podClaim{ClaimName: "c"},
			claim:   testClaim("c", "u-c", nil, "p1"),
			wantErr: "ResourceClaim c: not allocated",
		},
		{
			name:    "result without driver",
			pc:      podClaim{ClaimName: "c"},
			claim:   testClaim("c", "u-c", []string{""}, "p1"),
			wantErr: "ResourceClaim c: DRA driver name is empty",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkClaim(pod, tt.pc, tt.claim)
			if errString(err) != tt.wantErr {
				t.Fatalf("error %q, want %q", errString(err), tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func claimOf(name string, drivers []string, prepared bool, pods ...types.UID) Claim {
	c := Claim{Namespace: "default", Name: name, UID: types.UID("u-" + name), Drivers: drivers, Pods: pods, Prepared: prepared}
	if prepared {
		for _, d := range drivers {
			c.Devices = append(c.Devices, Device{Driver: d, Pool: "pool", Device: name, CDIDeviceIDs: []string{d + "/gpu=" + name}})
		}
	}
	return c
}

func stateOf(cs ...Claim) State {
	st := State{}
	for _, c := range cs {
		st[c.key()] = c
	}
	return st
}

func ref(name string) claimRef {
	return claimRef{Namespace: "default", Name: name, UID: types.UID("u-" + name)}
}

var (
	drvA = []string{"a.example.com"}
	drvB = []string{"b.example.com"}
	drvs = []string{"a.example.com", "b.example.com"}
)

func TestPlanPrepare(t *testing.T) {
	tests := []struct {
		name      string
		state     State
		claims    []Claim
		wantState State
		want      []batch
		wantErr   string
	}{
		{
			name:      "new claims grouped by driver, in driver order",
			state:     State{},
			claims:    []Claim{claimOf("x", drvB, false), claimOf("y", drvs, false), claimOf("z", drvA, false)},
			wantState: stateOf(claimOf("x", drvB, false, "p1"), claimOf("y", drvs, false, "p1"), claimOf("z", drvA, false, "p1")),
			want: []batch{
				{Driver: "a.example.com", Claims: []claimRef{ref("y"), ref("z")}},
				{Driver: "b.example.com", Claims: []claimRef{ref("x"), ref("y")}},
			},
		},
		{
			name:      "a shared claim prepared for another pod is not prepared again",
			state:     stateOf(claimOf("x", drvA, true, "p0")),
			claims:    []Claim{claimOf("x", drvA, false)},
			wantState: stateOf(claimOf("x", drvA, true, "p0", "p1")),
		},
		{
			name:      "prepared for this pod already: nothing changes",
			state:     stateOf(claimOf("x", drvA, true, "p1")),
			claims:    []Claim{claimOf("x", drvA, false)},
			wantState: stateOf(claimOf("x", drvA, true, "p1")),
		},
		{
			name:      "referenced but unprepared (a failed attempt): prepared again",
			state:     stateOf(claimOf("x", drvA, false, "p1")),
			claims:    []Claim{claimOf("x", drvA, false)},
			wantState: stateOf(claimOf("x", drvA, false, "p1")),
			want:      []batch{{Driver: "a.example.com", Claims: []claimRef{ref("x")}}},
		},
		{
			name:      "a claim without driver is prepared at once",
			state:     State{},
			claims:    []Claim{claimOf("x", nil, false)},
			wantState: stateOf(claimOf("x", nil, true, "p1")),
		},
		{
			name:      "same name, another UID",
			state:     stateOf(claimOf("x", drvA, true, "p0")),
			claims:    []Claim{{Namespace: "default", Name: "x", UID: "new", Drivers: drvA}},
			wantState: stateOf(claimOf("x", drvA, true, "p0")),
			wantErr:   "old ResourceClaim with same name x and different UID u-x still exists (previous pod force-deleted?!)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneState(tt.state)
			got, bs, err := planPrepare(tt.state, "p1", tt.claims)
			if errString(err) != tt.wantErr {
				t.Fatalf("error %q, want %q", errString(err), tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.wantState) {
				t.Errorf("state %+v, want %+v", got, tt.wantState)
			}
			if !reflect.DeepEqual(bs, tt.want) {
				t.Errorf("batches %+v, want %+v", bs, tt.want)
			}
			if !reflect.DeepEqual(tt.state, before) {
				t.Errorf("argument changed: %+v, was %+v", tt.state, before)
			}
		})
	}
}

func cloneState(st State) State {
	out := State{}
	for k, c := range st {
		out[k] = c.clone()
	}
	return out
}

func TestMarkPrepared(t *testing.T) {
	dev := func(d, name string) []Device {
		return []Device{{Driver: d, Pool: "pool", Device: name, CDIDeviceIDs: []string{d + "/gpu=" + name}}}
	}
	res := func(d, name string) prepareResult {
		return prepareResult{Driver: d, Claim: ref(name), Devices: dev(d, name)}
	}
	tests := []struct {
		name    string
		state   State
		results []prepareResult
		want    State
	}{
		{
			name:    "every driver answered",
			state:   stateOf(claimOf("x", drvs, false, "p1"), claimOf("y", drvA, false, "p1")),
			results: []prepareResult{res("a.example.com", "x"), res("b.example.com", "x"), res("a.example.com", "y")},
			want:    stateOf(claimOf("x", drvs, true, "p1"), claimOf("y", drvA, true, "p1")),
		},
		{
			name:    "one of two drivers failed: not prepared, no devices",
			state:   stateOf(claimOf("x", drvs, false, "p1"), claimOf("y", drvA, false, "p1")),
			results: []prepareResult{res("a.example.com", "x"), res("a.example.com", "y")},
			want:    stateOf(claimOf("x", drvs, false, "p1"), claimOf("y", drvA, true, "p1")),
		},
		{
			name:    "a result for a claim of another UID is ignored",
			state:   stateOf(Claim{Namespace: "default", Name: "x", UID: "other", Drivers: drvA, Pods: []types.UID{"p1"}}),
			results: []prepareResult{res("a.example.com", "x")},
			want:    stateOf(Claim{Namespace: "default", Name: "x", UID: "other", Drivers: drvA, Pods: []types.UID{"p1"}}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := markPrepared(tt.state, tt.results); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPlanUnprepare(t *testing.T) {
	tests := []struct {
		name      string
		state     State
		wantState State
		want      []batch
	}{
		{
			name:      "shared claim: only the reference goes",
			state:     stateOf(claimOf("x", drvA, true, "p0", "p1")),
			wantState: stateOf(claimOf("x", drvA, true, "p0")),
		},
		{
			name:      "last user: unprepared by each driver, reference kept until done",
			state:     stateOf(claimOf("x", drvs, true, "p1"), claimOf("y", drvB, true, "p1")),
			wantState: stateOf(claimOf("x", drvs, true, "p1"), claimOf("y", drvB, true, "p1")),
			want: []batch{
				{Driver: "a.example.com", Claims: []claimRef{ref("x")}},
				{Driver: "b.example.com", Claims: []claimRef{ref("x"), ref("y")}},
			},
		},
		{
			name:      "an unprepared claim (failed prepare) is unprepared all the same",
			state:     stateOf(claimOf("x", drvA, false, "p1")),
			wantState: stateOf(claimOf("x", drvA, false, "p1")),
			want:      []batch{{Driver: "a.example.com", Claims: []claimRef{ref("x")}}},
		},
		{
			name:      "claim of another pod only: untouched",
			state:     stateOf(claimOf("x", drvA, true, "p0")),
			wantState: stateOf(claimOf("x", drvA, true, "p0")),
		},
		{
			name:      "claim without driver: forgotten at once",
			state:     stateOf(claimOf("x", nil, true, "p1")),
			wantState: State{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var keys []string
			for k := range tt.state {
				keys = append(keys, k)
			}
			got, bs := planUnprepare(tt.state, "p1", slices.Sorted(slices.Values(keys)))
			if !reflect.DeepEqual(got, tt.wantState) {
				t.Errorf("state %+v, want %+v", got, tt.wantState)
			}
			if !reflect.DeepEqual(bs, tt.want) {
				t.Errorf("batches %+v, want %+v", bs, tt.want)
			}
		})
	}
}

func TestForgetUnprepared(t *testing.T) {
	st := stateOf(claimOf("x", drvs, true, "p1"), claimOf("y", drvA, true, "p1"), claimOf("z", drvA, true, "p2"))
	got := forgetUnprepared(st, map[string]bool{
		"a.example.com\x00default/x": true, // b failed for x
		"a.example.com\x00default/y": true,
	})
	want := stateOf(claimOf("x", drvs, true, "p1"), claimOf("z", drvA, true, "p2"))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestContainerCDIDevices(t *testing.T) {
	st := stateOf(Claim{
		Namespace: "default", Name: "gpus", UID: "u-gpus", Drivers: drvA, Pods: []types.UID{"p1"}, Prepared: true,
		Devices: []Device{
			{Driver: "a.example.com", Device: "g0", RequestNames: []string{"big"}, CDIDeviceIDs: []string{"a.example.com/gpu=g0"}},
			{Driver: "a.example.com", Device: "g1", RequestNames: []string{"small"}, CDIDeviceIDs: []string{"a.example.com/gpu=g1", "a.example.com/gpu=common"}},
			{Driver: "a.example.com", Device: "all", CDIDeviceIDs: []string{"a.example.com/gpu=common"}},
		},
	}, claimOf("gen-nic", drvB, true, "p1"), claimOf("pending", drvA, false, "p1"))
	pod := testPod("p1", []v1.PodResourceClaim{named("g", "gpus"), templated("n", "nic"), named("p", "pending"), templated("none", "t")},
		map[string]string{"n": "gen-nic", "none": ""})
	ctr := func(refs ...v1.ResourceClaim) *v1.Container {
		return &v1.Container{Name: "c", Resources: v1.ResourceRequirements{Claims: refs}}
	}
	tests := []struct {
		name    string
		ctr     *v1.Container
		want    []string
		wantErr string
	}{
		{name: "no claims", ctr: ctr()},
		{name: "whole claim, each ID once", ctr: ctr(v1.ResourceClaim{Name: "g"}), want: []string{"a.example.com/gpu=g0", "a.example.com/gpu=g1", "a.example.com/gpu=common"}},
		{name: "one request, and devices serving every request", ctr: ctr(v1.ResourceClaim{Name: "g", Request: "small"}), want: []string{"a.example.com/gpu=g1", "a.example.com/gpu=common"}},
		{name: "a subrequest counts as its request", ctr: ctr(v1.ResourceClaim{Name: "g", Request: "big/a100"}), want: []string{"a.example.com/gpu=g0", "a.example.com/gpu=common"}},
		{name: "template claim by its generated name", ctr: ctr(v1.ResourceClaim{Name: "n"}), want: []string{"b.example.com/gpu=gen-nic"}},
		{name: "template claim needing no claim", ctr: ctr(v1.ResourceClaim{Name: "none"})},
		{name: "claim not prepared", ctr: ctr(v1.ResourceClaim{Name: "p"}), wantErr: "internal error: unable to get claim info for ResourceClaim pending in namespace default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := containerCDIDevices(st, pod, tt.ctr)
			if errString(err) != tt.wantErr {
				t.Fatalf("error %q, want %q", errString(err), tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckAnswers(t *testing.T) {
	b := batch{Driver: "a.example.com", Claims: []claimRef{ref("x"), ref("y")}}
	tests := []struct {
		name     string
		answers  map[string]claimResult
		wantDone []string
		wantErrs []string
	}{
		{name: "all answered", answers: map[string]claimResult{"u-x": {}, "u-y": {}}, wantDone: []string{"x", "y"}},
		{
			name:     "one failed",
			answers:  map[string]claimResult{"u-x": {Error: "no such GPU"}, "u-y": {}},
			wantDone: []string{"y"},
			wantErrs: []string{"DRA driver a.example.com: NodePrepareResources failed for ResourceClaim x: no such GPU"},
		},
		{
			name:     "one skipped",
			answers:  map[string]claimResult{"u-x": {}},
			wantDone: []string{"x"},
			wantErrs: []string{"DRA driver a.example.com: NodePrepareResources skipped ResourceClaim y"},
		},
		{
			name:     "unknown claim: nothing trusted",
			answers:  map[string]claimResult{"u-x": {}, "u-y": {}, "u-z": {}},
			wantErrs: []string{"DRA driver a.example.com: NodePrepareResources returned result for unknown claim UID u-z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, err := checkAnswers("NodePrepareResources", b, tt.answers)
			var names []string
			for _, d := range done {
				names = append(names, d.Claim.Name)
			}
			if !reflect.DeepEqual(names, tt.wantDone) {
				t.Errorf("done %q, want %q", names, tt.wantDone)
			}
			if errString(err) != strings.Join(tt.wantErrs, "\n") {
				t.Errorf("error %q, want %q", errString(err), tt.wantErrs)
			}
		})
	}
}

func TestChooseService(t *testing.T) {
	tests := []struct {
		offered []string
		want    string
		wantErr string
	}{
		{offered: []string{"v1beta1.DRAPlugin", "v1.DRAPlugin"}, want: "v1.DRAPlugin"},
		{offered: []string{"v1.DRAPlugin"}, want: "v1.DRAPlugin"},
		{offered: []string{"v1beta1.DRAPlugin"}, want: "v1beta1.DRAPlugin"},
		{offered: []string{"v1alpha4.DRAPlugin", "1.0.0"}, wantErr: `none of services supported by the plugin (["v1alpha4.DRAPlugin" "1.0.0"]) are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])`},
		{offered: nil, wantErr: "empty list of supported gRPC services (aka supported versions)"},
	}
	for _, tt := range tests {
		got, err := chooseService(tt.offered)
		if got != tt.want || errString(err) != tt.wantErr {
			t.Errorf("chooseService(%q) = %q, %q; want %q, %q", tt.offered, got, errString(err), tt.want, tt.wantErr)
		}
	}
}

// A container's claims come in the order of the pod's resourceClaims,
// whole (the pod-resources API lists every device of a claim), and a
// claim not prepared is an error.
func TestContainerClaims(t *testing.T) {
	st := stateOf(claimOf("gpus", drvA, true, "p1"), claimOf("gen-nic", drvB, true, "p1"), claimOf("pending", drvA, false, "p1"))
	pod := testPod("p1", []v1.PodResourceClaim{templated("n", "nic"), named("g", "gpus"), named("p", "pending")},
		map[string]string{"n": "gen-nic"})
	ctr := &v1.Container{Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "g"}, {Name: "n", Request: "r"}}}}
	got, err := containerClaims(st, pod, ctr)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "gen-nic" || got[1].Name != "gpus" || len(got[1].Devices) != len(st["default/gpus"].Devices) {
		t.Errorf("claims %+v", got)
	}
	ctr.Resources.Claims = []v1.ResourceClaim{{Name: "p"}}
	if _, err := containerClaims(st, pod, ctr); errString(err) != "unable to get information for ResourceClaim pending" {
		t.Errorf("error %v", err)
	}
}
