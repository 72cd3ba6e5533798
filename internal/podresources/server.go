// Package podresources serves the kubelet's pod-resources API
// (k8s.io/kubelet/pkg/apis/podresources/v1) on the kubelet's unix socket, so
// monitoring agents (GPU exporters, topology exporters) learn which devices
// each container holds exactly as they would from a kubelet: its device
// plugins' devices and its ResourceClaims' devices (dynamic_resources).
// berth has no CPU manager or memory manager, so cpu_ids and memory are
// always empty.
package podresources

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/berth-dev/berth/internal/dra"
)

// DevicesProvider is the device manager seen from this API. The slices it
// returns belong to the caller: they are marshalled after the call returns,
// so they must not be mutated afterwards.
type DevicesProvider interface {
	// GetDevices returns the devices allocated to one container, one entry
	// per resource (and per NUMA node, as the kubelet splits them).
	GetDevices(podUID, containerName string) []*podresourcesapi.ContainerDevices
	// GetAllocatableDevices returns every healthy device with its topology.
	GetAllocatableDevices() []*podresourcesapi.ContainerDevices
}

// PodsProvider lists the pods berth runs (active pods: not terminal), the
// kubelet's GetActivePods: a terminal pod's devices may already be handed to
// another pod, so reporting them would show one device held twice.
type PodsProvider interface {
	GetPods() []*v1.Pod
	GetPodByName(namespace, name string) (*v1.Pod, bool)
}

// ClaimsProvider is the DRA manager seen from this API (*dra.Manager is
// one): the prepared claims a container references.
type ClaimsProvider interface {
	ContainerClaims(pod *v1.Pod, c *v1.Container) ([]dra.Claim, error)
}

type server struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	pods    PodsProvider
	devices DevicesProvider
	claims  ClaimsProvider // nil without DRA
}

// NewServer returns the v1 PodResourcesLister over berth's pods, devices
// and, where claims is not nil, their ResourceClaims.
func NewServer(pods PodsProvider, devices DevicesProvider, claims ClaimsProvider) podresourcesapi.PodResourcesListerServer {
	return &server{pods: pods, devices: devices, claims: claims}
}

// List returns the resources of every active pod.
func (s *server) List(_ context.Context, _ *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	pods := s.pods.GetPods()
	resp := &podresourcesapi.ListPodResourcesResponse{
		PodResources: make([]*podresourcesapi.PodResources, 0, len(pods)),
	}
	for _, pod := range pods {
		resp.PodResources = append(resp.PodResources, s.podResources(pod))
	}
	return resp, nil
}

// Get returns the resources of one pod. The kubelet answers a missing pod
// with a plain error (gRPC code Unknown) and does not check the request;
// berth keeps the kubelet's message but gives the codes a client can act on:
// InvalidArgument for an empty field, NotFound for a pod it does not run.
func (s *server) Get(_ context.Context, req *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	name, namespace := req.GetPodName(), req.GetPodNamespace()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "pod_name: required")
	}
	if namespace == "" {
		return nil, status.Error(codes.InvalidArgument, "pod_namespace: required")
	}
	pod, ok := s.pods.GetPodByName(namespace, name)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod %s in namespace %s not found", name, namespace)
	}
	return &podresourcesapi.GetPodResourcesResponse{PodResources: s.podResources(pod)}, nil
}

// GetAllocatableResources returns every device berth can hand out: the
// node's capacity, not what is free.
func (s *server) GetAllocatableResources(_ context.Context, _ *podresourcesapi.AllocatableResourcesRequest) (*podresourcesapi.AllocatableResourcesResponse, error) {
	return &podresourcesapi.AllocatableResourcesResponse{
		Devices: s.devices.GetAllocatableDevices(),
	}, nil
}

// podResources reports the containers that can hold devices while the pod
// runs: its sidecars first, then its regular containers, as the kubelet
// does. Plain init containers have finished by then, and ephemeral
// containers cannot request resources.
func (s *server) podResources(pod *v1.Pod) *podresourcesapi.PodResources {
	res := &podresourcesapi.PodResources{
		Name:       pod.Name,
		Namespace:  pod.Namespace,
		Containers: make([]*podresourcesapi.ContainerResources, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers)),
	}
	uid := string(pod.UID)
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !isSidecar(c) {
			continue
		}
		res.Containers = append(res.Containers, s.containerResources(pod, uid, c))
	}
	for i := range pod.Spec.Containers {
		res.Containers = append(res.Containers, s.containerResources(pod, uid, &pod.Spec.Containers[i]))
	}
	return res
}

func (s *server) containerResources(pod *v1.Pod, podUID string, c *v1.Container) *podresourcesapi.ContainerResources {
	return &podresourcesapi.ContainerResources{
		Name:             c.Name,
		Devices:          s.devices.GetDevices(podUID, c.Name),
		DynamicResources: s.dynamicResources(pod, c),
	}
}

// dynamicResources are the container's claims with each device its
// drivers prepared (the kubelet's GetDynamicResources). A claim that
// cannot be read is left out with the rest, as the kubelet logs and
// answers none. Unlike the kubelet, whose list of CDI devices grows from
// one device to the next of a driver, each device lists its own.
func (s *server) dynamicResources(pod *v1.Pod, c *v1.Container) []*podresourcesapi.DynamicResource {
	if s.claims == nil || (len(c.Resources.Claims) == 0 && pod.Status.ExtendedResourceClaimStatus == nil) {
		return nil
	}
	claims, err := s.claims.ContainerClaims(pod, c)
	if err != nil {
		return nil
	}
	out := make([]*podresourcesapi.DynamicResource, 0, len(claims))
	for _, cl := range claims {
		dr := &podresourcesapi.DynamicResource{ClaimName: cl.Name, ClaimNamespace: cl.Namespace}
		for _, d := range cl.Devices {
			cr := &podresourcesapi.ClaimResource{DriverName: d.Driver, PoolName: d.Pool, DeviceName: d.Device}
			for _, id := range d.CDIDeviceIDs {
				cr.CdiDevices = append(cr.CdiDevices, &podresourcesapi.CDIDevice{Name: id})
			}
			if d.ShareID != "" {
				cr.ShareId = &d.ShareID
			}
			dr.ClaimResources = append(dr.ClaimResources, cr)
		}
		out = append(out, dr)
	}
	return out
}

// isSidecar reports whether an init container is a sidecar: one that keeps
// running beside the regular containers (restartPolicy Always).
func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}
