package kuberuntime

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/cm"
)

// ContainerResources is the container's cgroup values, as CreateContainer
// gets them, for an UpdateContainerResources of an in-place resize (the
// kubelet's generateContainerResources).
func ContainerResources(pod *v1.Pod, c *v1.Container, memoryCapacity int64, memory cm.MemoryPolicy) (*runtimeapi.LinuxContainerResources, error) {
	return containerResources(pod, c, memoryCapacity, memory)
}
