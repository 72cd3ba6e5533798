package podresources

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// fakePods serves a fixed list of pods.
type fakePods []*v1.Pod

func (f fakePods) GetPods() []*v1.Pod { return f }

func (f fakePods) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	for _, p := range f {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

type containerKey struct{ podUID, container string }

// fakeDevices serves fixed allocations, keyed by pod UID and container.
type fakeDevices struct {
	allocated   map[containerKey][]*podresourcesapi.ContainerDevices
	allocatable []*podresourcesapi.ContainerDevices
}

func (f *fakeDevices) GetDevices(podUID, containerName string) []*podresourcesapi.ContainerDevices {
	return f.allocated[containerKey{podUID, containerName}]
}

func (f *fakeDevices) GetAllocatableDevices() []*podresourcesapi.ContainerDevices {
	return f.allocatable
}

func devices(resource string, numa int64, ids ...string) *podresourcesapi.ContainerDevices {
	return &podresourcesapi.ContainerDevices{
		ResourceName: resource,
		DeviceIds:    ids,
		Topology:     &podresourcesapi.TopologyInfo{Nodes: []*podresourcesapi.NUMANode{{ID: numa}}},
	}
}

func pod(namespace, name, uid string, mutate ...func(*v1.PodSpec)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app"}}},
	}
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

// withInits adds a sidecar "sidecar" between two plain init containers, and
// an ephemeral container: only the sidecar is reported.
func withInits(spec *v1.PodSpec) {
	always := v1.ContainerRestartPolicyAlways
	spec.InitContainers = []v1.Container{
		{Name: "setup"},
		{Name: "sidecar", RestartPolicy: &always},
		{Name: "migrate"},
	}
	spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}}
}

func containers(names ...string) func(*v1.PodSpec) {
	return func(spec *v1.PodSpec) {
		spec.Containers = nil
		for _, n := range names {
			spec.Containers = append(spec.Containers, v1.Container{Name: n})
		}
	}
}

func TestList(t *testing.T) {
	gpu0 := devices("nvidia.com/gpu", 0, "gpu0")
	gpu1 := devices("nvidia.com/gpu", 1, "gpu1")
	nic := devices("example.com/nic", 0, "nic0", "nic1")

	tests := []struct {
		name      string
		pods      fakePods
		allocated map[containerKey][]*podresourcesapi.ContainerDevices
		want      []*podresourcesapi.PodResources
	}{
		{
			name: "no pods",
		},
		{
			name: "pod without devices",
			pods: fakePods{pod("default", "web", "uid-web")},
			want: []*podresourcesapi.PodResources{{
				Name: "web", Namespace: "default",
				Containers: []*podresourcesapi.ContainerResources{{Name: "app"}},
			}},
		},
		{
			name: "devices of one resource on two NUMA nodes and of another resource",
			pods: fakePods{pod("ml", "train", "uid-train")},
			allocated: map[containerKey][]*podresourcesapi.ContainerDevices{
				{"uid-train", "app"}: {gpu0, gpu1, nic},
			},
			want: []*podresourcesapi.PodResources{{
				Name: "train", Namespace: "ml",
				Containers: []*podresourcesapi.ContainerResources{{Name: "app", Devices: []*podresourcesapi.ContainerDevices{gpu0, gpu1, nic}}},
			}},
		},
		{
			name: "sidecars first, then regular containers; plain init and ephemeral containers left out",
			pods: fakePods{pod("ml", "train", "uid-train", withInits, containers("a", "b"))},
			allocated: map[containerKey][]*podresourcesapi.ContainerDevices{
				{"uid-train", "sidecar"}: {nic},
				{"uid-train", "setup"}:   {gpu1},
				{"uid-train", "b"}:       {gpu0},
			},
			want: []*podresourcesapi.PodResources{{
				Name: "train", Namespace: "ml",
				Containers: []*podresourcesapi.ContainerResources{
					{Name: "sidecar", Devices: []*podresourcesapi.ContainerDevices{nic}},
					{Name: "a"},
					{Name: "b", Devices: []*podresourcesapi.ContainerDevices{gpu0}},
				},
			}},
		},
		{
			name: "devices are looked up by pod UID, pods keep the provider's order",
			pods: fakePods{pod("ns2", "same", "uid-2"), pod("ns1", "same", "uid-1")},
			allocated: map[containerKey][]*podresourcesapi.ContainerDevices{
				{"uid-1", "app"}: {gpu0},
				{"uid-2", "app"}: {gpu1},
			},
			want: []*podresourcesapi.PodResources{
				{Name: "same", Namespace: "ns2", Containers: []*podresourcesapi.ContainerResources{{Name: "app", Devices: []*podresourcesapi.ContainerDevices{gpu1}}}},
				{Name: "same", Namespace: "ns1", Containers: []*podresourcesapi.ContainerResources{{Name: "app", Devices: []*podresourcesapi.ContainerDevices{gpu0}}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := NewServer(tt.pods, &fakeDevices{allocated: tt.allocated}, nil)
			got, err := srv.List(context.Background(), &podresourcesapi.ListPodResourcesRequest{})
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			want := &podresourcesapi.ListPodResourcesResponse{PodResources: tt.want}
			if !proto.Equal(got, want) {
				t.Errorf("List:\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestGet(t *testing.T) {
	gpu0 := devices("nvidia.com/gpu", 0, "gpu0")
	nic := devices("example.com/nic", 1, "nic0")
	pods := fakePods{
		pod("ml", "train", "uid-train", withInits),
		pod("default", "web", "uid-web"),
	}
	allocated := map[containerKey][]*podresourcesapi.ContainerDevices{
		{"uid-train", "app"}:     {gpu0},
		{"uid-train", "sidecar"}: {nic},
	}

	tests := []struct {
		name      string
		req       *podresourcesapi.GetPodResourcesRequest
		want      *podresourcesapi.PodResources
		wantCode  codes.Code
		wantInErr string
	}{
		{
			name: "pod with a sidecar",
			req:  &podresourcesapi.GetPodResourcesRequest{PodNamespace: "ml", PodName: "train"},
			want: &podresourcesapi.PodResources{
				Name: "train", Namespace: "ml",
				Containers: []*podresourcesapi.ContainerResources{
					{Name: "sidecar", Devices: []*podresourcesapi.ContainerDevices{nic}},
					{Name: "app", Devices: []*podresourcesapi.ContainerDevices{gpu0}},
				},
			},
		},
		{
			name: "pod without devices",
			req:  &podresourcesapi.GetPodResourcesRequest{PodNamespace: "default", PodName: "web"},
			want: &podresourcesapi.PodResources{
				Name: "web", Namespace: "default",
				Containers: []*podresourcesapi.ContainerResources{{Name: "app"}},
			},
		},
		{
			name:      "unknown pod",
			req:       &podresourcesapi.GetPodResourcesRequest{PodNamespace: "ml", PodName: "gone"},
			wantCode:  codes.NotFound,
			wantInErr: "pod gone in namespace ml not found",
		},
		{
			name:      "name in another namespace",
			req:       &podresourcesapi.GetPodResourcesRequest{PodNamespace: "default", PodName: "train"},
			wantCode:  codes.NotFound,
			wantInErr: "pod train in namespace default not found",
		},
		{
			name:      "empty name",
			req:       &podresourcesapi.GetPodResourcesRequest{PodNamespace: "ml"},
			wantCode:  codes.InvalidArgument,
			wantInErr: "pod_name",
		},
		{
			name:      "empty namespace",
			req:       &podresourcesapi.GetPodResourcesRequest{PodName: "train"},
			wantCode:  codes.InvalidArgument,
			wantInErr: "pod_namespace",
		},
		{
			name:      "nil request",
			wantCode:  codes.InvalidArgument,
			wantInErr: "pod_name",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := NewServer(pods, &fakeDevices{allocated: allocated}, nil)
			got, err := srv.Get(context.Background(), tt.req)
			if tt.wantCode != codes.OK {
				st, _ := status.FromError(err)
				if st.Code() != tt.wantCode || !strings.Contains(st.Message(), tt.wantInErr) {
					t.Fatalf("Get: err = %v, want code %v with %q", err, tt.wantCode, tt.wantInErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			want := &podresourcesapi.GetPodResourcesResponse{PodResources: tt.want}
			if !proto.Equal(got, want) {
				t.Errorf("Get:\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestGetAllocatableResources(t *testing.T) {
	tests := []struct {
		name        string
		allocatable []*podresourcesapi.ContainerDevices
	}{
		{name: "no devices"},
		{
			name: "devices per resource and NUMA node",
			allocatable: []*podresourcesapi.ContainerDevices{
				devices("nvidia.com/gpu", 0, "gpu0", "gpu1"),
				devices("nvidia.com/gpu", 1, "gpu2"),
				{ResourceName: "example.com/nic", DeviceIds: []string{"nic0"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := NewServer(fakePods{pod("default", "web", "uid-web")}, &fakeDevices{allocatable: tt.allocatable}, nil)
			got, err := srv.GetAllocatableResources(context.Background(), &podresourcesapi.AllocatableResourcesRequest{})
			if err != nil {
				t.Fatalf("GetAllocatableResources: %v", err)
			}
			// No CPU or memory manager: cpu_ids and memory stay empty.
			want := &podresourcesapi.AllocatableResourcesResponse{Devices: tt.allocatable}
			if !proto.Equal(got, want) {
				t.Errorf("GetAllocatableResources:\n got %v\nwant %v", got, want)
			}
		})
	}
}
