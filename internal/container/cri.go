package container

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// StateOf is the State of a container the CRI reports in state s. The
// runtime service and the PLEG both read states from the CRI, and a worker
// compares what each saw, so they must map them alike.
func StateOf(s runtimeapi.ContainerState) State {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return StateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return StateExited
	default:
		return StateUnknown
	}
}
