package podworker

import (
	"context"
	"slices"
	"sort"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/pleg"
	"github.com/berth-dev/berth/internal/runtime"
)

// A sync reads the pod's runtime status once, at its start, and passes that
// snapshot down; what the sync itself changes is folded into a copy of it
// rather than read again: the sandbox it made, the containers it made or
// stopped, each read alone once the steps are done (observe).

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

// hasActive tells whether st has anything stopPod stops: a container not
// exited or a ready sandbox.
func hasActive(st *container.PodStatus) bool {
	return len(st.ActiveContainers()) > 0 || slices.ContainsFunc(st.Sandboxes, func(sb container.SandboxStatus) bool { return sb.Ready })
}

// withSandbox is st with sb, the sandbox the sync just created, as its
// newest.
func withSandbox(st *container.PodStatus, sb container.SandboxStatus) *container.PodStatus {
	out := *st
	out.Sandboxes = append([]container.SandboxStatus{sb}, st.Sandboxes...)
	return &out
}

// readContainers reads each container of refs alone: read has those the
// runtime has, gone the IDs of those it no longer has.
func readContainers(ctx context.Context, rt Runtime, refs []pleg.ContainerRef) (read []container.ContainerStatus, gone []string, err error) {
	for _, c := range refs {
		cs, err := rt.ReadContainerStatus(ctx, c.ID, c.SandboxID)
		if runtime.IsNotFound(err) {
			gone = append(gone, c.ID)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		read = append(read, cs)
	}
	return read, gone, nil
}

// withSandboxes is st with the sandboxes in read as read (each replaces
// the sandbox of its ID, or is added when new) and without those in gone,
// newest first as PodStatus orders them.
func withSandboxes(st *container.PodStatus, read []container.SandboxStatus, gone []string) *container.PodStatus {
	out := *st
	out.Sandboxes = slices.DeleteFunc(slices.Clone(st.Sandboxes), func(sb container.SandboxStatus) bool {
		return slices.Contains(gone, sb.ID)
	})
	for _, r := range read {
		if i := slices.IndexFunc(out.Sandboxes, func(sb container.SandboxStatus) bool { return sb.ID == r.ID }); i >= 0 {
			out.Sandboxes[i] = r
			continue
		}
		out.Sandboxes = append(out.Sandboxes, r)
	}
	sort.SliceStable(out.Sandboxes, func(i, j int) bool {
		return out.Sandboxes[i].CreatedAt.After(out.Sandboxes[j].CreatedAt)
	})
	return &out
}

// withContainers is st with the containers a sync created, started or
// stopped as it read them after its steps (read: each replaces the
// instance of its ID, or is added when new) and without those it removed
// or that the runtime no longer had (gone), newest first as PodStatus
// orders them.
func withContainers(st *container.PodStatus, read []container.ContainerStatus, gone []string) *container.PodStatus {
	out := *st
	out.Containers = slices.DeleteFunc(slices.Clone(st.Containers), func(c container.ContainerStatus) bool {
		return slices.Contains(gone, c.ID)
	})
	var made []container.ContainerStatus
	for _, r := range read {
		if i := slices.IndexFunc(out.Containers, func(c container.ContainerStatus) bool { return c.ID == r.ID }); i >= 0 {
			out.Containers[i] = r
			continue
		}
		made = append(made, r)
	}
	// read has what the sync made in the order it made them: the last is
	// the newest, first even where the creation times are equal.
	slices.Reverse(made)
	out.Containers = append(made, out.Containers...)
	sort.SliceStable(out.Containers, func(i, j int) bool {
		return out.Containers[i].CreatedAt.After(out.Containers[j].CreatedAt)
	})
	return &out
}
