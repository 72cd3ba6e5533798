package fakecri

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
)

// PodStatus is what runtime.Service.PodStatus reads, made from the fake's
// state in one call: the pod's sandboxes and containers, newest first. It
// reads no termination message files.
func (r *Runtime) PodStatus(ctx context.Context, uid types.UID) (*container.PodStatus, error) {
	if err := r.begin(ctx, "PodStatus", string(uid)); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sel := map[string]string{container.LabelPodUID: string(uid)}
	ps := &container.PodStatus{UID: uid}
	var sbs []*sandbox
	for _, s := range r.sandboxes {
		if matches(s.pb.Labels, sel) {
			sbs = append(sbs, s)
		}
	}
	slices.SortFunc(sbs, func(a, b *sandbox) int {
		return cmp.Or(cmp.Compare(b.pb.CreatedAt, a.pb.CreatedAt), cmp.Compare(b.seq, a.seq))
	})
	for _, s := range sbs {
		ps.Name, ps.Namespace = s.pb.Metadata.GetName(), s.pb.Metadata.GetNamespace()
		ps.Sandboxes = append(ps.Sandboxes, toSandboxStatus(sandboxStatusLocked(s)))
	}
	var cs []*ctr
	for _, c := range r.containers {
		if matches(c.pb.Labels, sel) {
			cs = append(cs, c)
		}
	}
	slices.SortFunc(cs, func(a, b *ctr) int {
		return cmp.Or(cmp.Compare(b.pb.CreatedAt, a.pb.CreatedAt), cmp.Compare(b.seq, a.seq))
	})
	for _, c := range cs {
		ps.Containers = append(ps.Containers, toContainerStatus(c.st, c.pb.PodSandboxId))
	}
	return ps, nil
}

// SandboxStatus is runtime.Service's: one sandbox's status.
func (r *Runtime) SandboxStatus(ctx context.Context, id string) (container.SandboxStatus, error) {
	if err := r.begin(ctx, "SandboxStatus", id); err != nil {
		return container.SandboxStatus{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sandboxes[id]
	if s == nil {
		return container.SandboxStatus{}, NotFound("sandbox " + id)
	}
	return toSandboxStatus(sandboxStatusLocked(s)), nil
}

// ReadContainerStatus is runtime.Service's: one container's status.
func (r *Runtime) ReadContainerStatus(ctx context.Context, id, sandboxID string) (container.ContainerStatus, error) {
	if err := r.begin(ctx, "ReadContainerStatus", id); err != nil {
		return container.ContainerStatus{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	if c == nil {
		return container.ContainerStatus{}, NotFound("container " + id)
	}
	return toContainerStatus(c.st, sandboxID), nil
}

// toSandboxStatus and toContainerStatus repeat runtime's conversions
// (podstatus.go) on purpose: internal/runtime imports internal/logs, whose
// tests use this fake, so the fake cannot import runtime. Keep them in
// step with runtime's.
func toSandboxStatus(st *runtimeapi.PodSandboxStatus) container.SandboxStatus {
	out := container.SandboxStatus{
		ID:          st.Id,
		Attempt:     st.Metadata.GetAttempt(),
		Ready:       st.State == runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt:   time.Unix(0, st.CreatedAt),
		HostNetwork: st.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE,
	}
	if ip := st.GetNetwork().GetIp(); ip != "" {
		out.IP, out.IPs = ip, []string{ip}
	}
	return out
}

func toContainerStatus(st *runtimeapi.ContainerStatus, sandboxID string) container.ContainerStatus {
	a := st.Annotations
	out := container.ContainerStatus{
		ID:                         st.Id,
		Name:                       st.Metadata.GetName(),
		SandboxID:                  sandboxID,
		State:                      toState(st.State),
		CreatedAt:                  unixNano(st.CreatedAt),
		StartedAt:                  unixNano(st.StartedAt),
		FinishedAt:                 unixNano(st.FinishedAt),
		ExitCode:                   st.ExitCode,
		Reason:                     st.Reason,
		Message:                    st.Message,
		Image:                      st.GetImage().GetImage(),
		ImageRef:                   st.ImageRef,
		Hash:                       a[container.AnnotationContainerHash],
		Init:                       a[container.AnnotationInitContainer] == "true",
		TerminationMessageHostPath: a[container.AnnotationTerminationMessageHostPath],
		LogPath:                    st.LogPath,
	}
	out.RestartCount, _ = strconv.Atoi(a[container.AnnotationRestartCount])
	out.TerminationGracePeriod, _ = strconv.ParseInt(a[container.AnnotationTerminationGracePeriod], 10, 64)
	return out
}

func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func toState(s runtimeapi.ContainerState) container.State {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return container.StateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return container.StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return container.StateExited
	default:
		return container.StateUnknown
	}
}
