package runtime

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/logs"
)

// The kubelet's caps on a termination message, and on the log tail that
// stands in for one under FallbackToLogsOnError.
const (
	maxTerminationMessage = 4096
	fallbackLogLines      = 80
	fallbackLogBytes      = 2048
)

// PodStatus returns everything the runtime knows about the pod with uid:
// its sandboxes and containers, newest first. It reads each container's
// termination message from the host file berth mounted for it.
func (s *Service) PodStatus(ctx context.Context, uid types.UID) (*container.PodStatus, error) {
	sel := map[string]string{container.LabelPodUID: string(uid)}
	sandboxes, err := s.ListPodSandboxes(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes of pod %s: %w", uid, err)
	}
	ctrs, err := s.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod %s: %w", uid, err)
	}
	ps := &container.PodStatus{UID: uid}
	for _, sb := range sandboxes {
		st, err := s.PodSandboxStatus(ctx, sb.Id)
		if err != nil {
			if IsNotFound(err) { // removed between list and status
				continue
			}
			return nil, fmt.Errorf("status of sandbox %s: %w", sb.Id, err)
		}
		ps.Name, ps.Namespace = sb.Metadata.GetName(), sb.Metadata.GetNamespace()
		ps.Sandboxes = append(ps.Sandboxes, sandboxStatus(st))
	}
	for _, c := range ctrs {
		st, err := s.ContainerStatus(ctx, c.Id)
		if err != nil {
			if IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("status of container %s: %w", c.Id, err)
		}
		ps.Containers = append(ps.Containers, containerStatus(st, c.PodSandboxId))
	}
	sort.SliceStable(ps.Sandboxes, func(i, j int) bool {
		return ps.Sandboxes[i].CreatedAt.After(ps.Sandboxes[j].CreatedAt)
	})
	sort.SliceStable(ps.Containers, func(i, j int) bool {
		return ps.Containers[i].CreatedAt.After(ps.Containers[j].CreatedAt)
	})
	return ps, nil
}

// SandboxStatus returns one sandbox's status: what a pod worker needs of the
// sandbox it just created (its IP), without reading the whole pod again.
func (s *Service) SandboxStatus(ctx context.Context, id string) (container.SandboxStatus, error) {
	st, err := s.PodSandboxStatus(ctx, id)
	if err != nil {
		return container.SandboxStatus{}, fmt.Errorf("status of sandbox %s: %w", id, err)
	}
	return sandboxStatus(st), nil
}

// ReadContainerStatus returns one container's status, with the ID of the
// sandbox it is in (the CRI's status lacks it): what a pod worker needs of
// the containers it just created or stopped, without reading the whole pod
// again.
func (s *Service) ReadContainerStatus(ctx context.Context, id, sandboxID string) (container.ContainerStatus, error) {
	st, err := s.ContainerStatus(ctx, id)
	if err != nil {
		return container.ContainerStatus{}, fmt.Errorf("status of container %s: %w", id, err)
	}
	return containerStatus(st, sandboxID), nil
}

func sandboxStatus(st *runtimeapi.PodSandboxStatus) container.SandboxStatus {
	out := container.SandboxStatus{
		ID:          st.Id,
		Attempt:     st.Metadata.GetAttempt(),
		Ready:       st.State == runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt:   time.Unix(0, st.CreatedAt),
		HostNetwork: st.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE,
	}
	if n := st.Network; n != nil && n.Ip != "" {
		out.IP = n.Ip
		out.IPs = append(out.IPs, n.Ip)
		for _, ip := range n.AdditionalIps {
			out.IPs = append(out.IPs, ip.Ip)
		}
	}
	return out
}

func containerStatus(st *runtimeapi.ContainerStatus, sandboxID string) container.ContainerStatus {
	a := st.Annotations
	out := container.ContainerStatus{
		ID:                         st.Id,
		Name:                       st.Metadata.GetName(),
		SandboxID:                  sandboxID,
		State:                      container.StateOf(st.State),
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
		User:                       containerUser(st.User),
	}
	out.RestartCount, _ = strconv.Atoi(a[container.AnnotationRestartCount])
	out.TerminationGracePeriod, _ = strconv.ParseInt(a[container.AnnotationTerminationGracePeriod], 10, 64)
	if out.State == container.StateExited {
		if msg := readTerminationMessage(out.TerminationMessageHostPath); msg != "" {
			out.Message = msg
		} else if out.ExitCode != 0 && a[container.AnnotationTerminationMessagePolicy] == string(v1.TerminationMessageFallbackToLogsOnError) {
			out.Message = logTail(out.LogPath)
		}
	}
	return out
}

// containerUser is the kubelet's toKubeContainerUser (Linux): the CRI
// status' user as the API reports it, nil where the runtime gives none.
func containerUser(u *runtimeapi.ContainerUser) *v1.ContainerUser {
	if u == nil {
		return nil
	}
	out := &v1.ContainerUser{}
	if l := u.GetLinux(); l != nil {
		out.Linux = &v1.LinuxContainerUser{UID: l.GetUid(), GID: l.GetGid(), SupplementalGroups: l.GetSupplementalGroups()}
	}
	return out
}

// logTail is the end of a container's log: the termination message of a
// failed container whose policy is FallbackToLogsOnError.
func logTail(path string) string {
	if path == "" {
		return ""
	}
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), ListTimeout)
	defer cancel()
	if err := logs.Copy(ctx, &buf, path, logs.Options{TailLines: fallbackLogLines}); err != nil {
		return ""
	}
	b := buf.Bytes()
	if len(b) > fallbackLogBytes {
		b = b[len(b)-fallbackLogBytes:]
	}
	return string(b)
}

func readTerminationMessage(path string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, maxTerminationMessage)
	n, _ := f.Read(buf)
	return string(buf[:n])
}

func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
