package container

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// State is a container's or sandbox's runtime state, independent of CRI enums.
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

// SandboxStatus is what the runtime reports about one pod sandbox.
type SandboxStatus struct {
	ID        string
	Attempt   uint32
	Ready     bool // CRI SANDBOX_READY
	CreatedAt time.Time
	IP        string
	IPs       []string
	// Network is the sandbox's network mode; HostNetwork pods have no IP of
	// their own.
	HostNetwork bool
}

// ContainerStatus is what the runtime reports about one container, plus the
// bookkeeping berth stored in its annotations when it created it.
type ContainerStatus struct {
	ID           string
	Name         string
	SandboxID    string
	State        State
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     int32
	Reason       string
	Message      string
	Image        string
	ImageRef     string
	Hash         string
	RestartCount int
	Init         bool
	// TerminationMessageHostPath is the host file mounted at the container's
	// terminationMessagePath; empty when none was mounted.
	TerminationMessageHostPath string
	TerminationGracePeriod     int64
	LogPath                    string
	// User is the identity the runtime started the process with (uid,
	// gid and every group, after supplementalGroupsPolicy); nil where the
	// runtime does not say (containerd before 2.0).
	User *v1.ContainerUser
}

// PodStatus is the runtime's view of one pod: every sandbox and container
// carrying its UID, newest first.
type PodStatus struct {
	UID        types.UID
	Name       string
	Namespace  string
	Sandboxes  []SandboxStatus
	Containers []ContainerStatus
}

// FindContainers returns the statuses of the named container, newest first.
func (s *PodStatus) FindContainers(name string) []*ContainerStatus {
	var out []*ContainerStatus
	for i := range s.Containers {
		if s.Containers[i].Name == name {
			out = append(out, &s.Containers[i])
		}
	}
	return out
}

// LatestContainer returns the newest status of the named container, or nil.
func (s *PodStatus) LatestContainer(name string) *ContainerStatus {
	for i := range s.Containers {
		if s.Containers[i].Name == name {
			return &s.Containers[i]
		}
	}
	return nil
}

// ActiveContainers returns the containers that are running, created or in
// an unknown state: everything that must be stopped before the pod is gone.
func (s *PodStatus) ActiveContainers() []*ContainerStatus {
	var out []*ContainerStatus
	for i := range s.Containers {
		if st := s.Containers[i].State; st == StateRunning || st == StateCreated || st == StateUnknown {
			out = append(out, &s.Containers[i])
		}
	}
	return out
}
