package podresources

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/dra"
)

// fakeClaims serves fixed claims by container name, or an error.
type fakeClaims struct {
	byContainer map[string][]dra.Claim
	err         error
}

func (f fakeClaims) ContainerClaims(_ *v1.Pod, c *v1.Container) ([]dra.Claim, error) {
	return f.byContainer[c.Name], f.err
}

// A container that references claims lists each claim with every device
// its drivers prepared, each device with its own CDI devices; a container
// without claims lists none, and a claim that cannot be read hides the
// container's claims rather than fail the call.
func TestListDynamicResources(t *testing.T) {
	withClaims := pod("ml", "train", "uid-train", func(s *v1.PodSpec) {
		s.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("train-gpu")}}
		s.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
		s.Containers = append(s.Containers, v1.Container{Name: "plain"})
	})
	claims := fakeClaims{byContainer: map[string][]dra.Claim{"app": {{
		Namespace: "ml", Name: "train-gpu",
		Devices: []dra.Device{
			{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0", CDIDeviceIDs: []string{"example.com/gpu=gpu-0"}},
			{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-1", CDIDeviceIDs: []string{"example.com/gpu=gpu-1"}, ShareID: "s1"},
		},
	}}}}
	srv := NewServer(fakePods{withClaims}, &fakeDevices{}, claims)
	resp, err := srv.List(context.Background(), &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := []*podresourcesapi.ContainerResources{
		{Name: "app", DynamicResources: []*podresourcesapi.DynamicResource{{
			ClaimName: "train-gpu", ClaimNamespace: "ml",
			ClaimResources: []*podresourcesapi.ClaimResource{
				{DriverName: "gpu.example.com", PoolName: "node-1", DeviceName: "gpu-0",
					CdiDevices: []*podresourcesapi.CDIDevice{{Name: "example.com/gpu=gpu-0"}}},
				{DriverName: "gpu.example.com", PoolName: "node-1", DeviceName: "gpu-1", ShareId: ptr.To("s1"),
					CdiDevices: []*podresourcesapi.CDIDevice{{Name: "example.com/gpu=gpu-1"}}},
			},
		}}},
		{Name: "plain"},
	}
	got := resp.PodResources[0].Containers
	if len(got) != len(want) {
		t.Fatalf("containers %v", got)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("container %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}

	claims.err = errors.New("unable to get information for ResourceClaim train-gpu")
	srv = NewServer(fakePods{withClaims}, &fakeDevices{}, claims)
	resp, err = srv.List(context.Background(), &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if dr := resp.PodResources[0].Containers[0].DynamicResources; len(dr) != 0 {
		t.Errorf("claims listed despite the error: %v", dr)
	}
}

// A pod whose extended resources the scheduler allocated through DRA lists
// its extended resource claim for the container that has it, though no
// container references a claim.
func TestListExtendedResourceClaim(t *testing.T) {
	p := pod("ml", "infer", "uid-infer", func(s *v1.PodSpec) {})
	p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "infer-extended-resources-x",
		RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "app", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}}
	claims := fakeClaims{byContainer: map[string][]dra.Claim{"app": {{Namespace: "ml", Name: "infer-extended-resources-x",
		Devices: []dra.Device{{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0", CDIDeviceIDs: []string{"example.com/gpu=gpu-0"}}}}}}}
	resp, err := NewServer(fakePods{p}, &fakeDevices{}, claims).List(context.Background(), &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	dr := resp.PodResources[0].Containers[0].DynamicResources
	if len(dr) != 1 || dr[0].ClaimName != "infer-extended-resources-x" || len(dr[0].ClaimResources) != 1 {
		t.Errorf("dynamic resources %v, want the extended resource claim", dr)
	}
}
