package podworker

import (
	"slices"

	"github.com/berth-dev/berth/internal/container"
)

// A sync reads the pod's runtime status once, at its start, and passes that
// snapshot down; what the sync itself changes is folded into a copy of it
// rather than read again.

// stoppedSnapshot is st after stopPod succeeded: every container it had
// active has exited and no sandbox is ready. Exit codes are left as read:
// only the states matter to the rest of the sync (which instances are old,
// which container an ephemeral one may target).
func stoppedSnapshot(st *container.PodStatus) *container.PodStatus {
	out := *st
	out.Containers = slices.Clone(st.Containers)
	for i := range out.Containers {
		if s := out.Containers[i].State; s == container.StateRunning || s == container.StateCreated || s == container.StateUnknown {
			out.Containers[i].State = container.StateExited
		}
	}
	out.Sandboxes = slices.Clone(st.Sandboxes)
	for i := range out.Sandboxes {
		out.Sandboxes[i].Ready = false
	}
	return &out
}

// withSandbox is st with sb, the sandbox the sync just created, as its
// newest.
func withSandbox(st *container.PodStatus, sb container.SandboxStatus) *container.PodStatus {
	out := *st
	out.Sandboxes = append([]container.SandboxStatus{sb}, st.Sandboxes...)
	return &out
}
