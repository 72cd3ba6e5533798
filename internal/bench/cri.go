package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/runtime"
)

// containerStarts returns, for each pod name, when the runtime started the
// last of its running containers: the pod's "all containers started".
func containerStarts(ctx context.Context, n nodeUnderTest, namespace string) (map[string]time.Time, error) {
	cri := n.criService()
	cs, err := cri.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{container.LabelPodNamespace: namespace},
	})
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, c := range cs {
		st, err := cri.ContainerStatus(ctx, c.Id)
		if err != nil {
			return nil, fmt.Errorf("status of container %s: %w", c.Id, err)
		}
		pod := c.Labels[container.LabelPodName]
		if at := time.Unix(0, st.StartedAt); at.After(out[pod]) {
			out[pod] = at
		}
	}
	return out, nil
}

// runningContainerID is the ID of pod's one running container.
func runningContainerID(ctx context.Context, n nodeUnderTest, namespace, pod string) (string, error) {
	cs, err := n.criService().ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{container.LabelPodNamespace: namespace, container.LabelPodName: pod},
	})
	if err != nil {
		return "", err
	}
	if len(cs) != 1 {
		return "", fmt.Errorf("pod %s/%s has %d running containers, want 1", namespace, pod, len(cs))
	}
	return cs[0].Id, nil
}

// containerPid is the pid of a running container's process.
func containerPid(ctx context.Context, n nodeUnderTest, id string) (int, error) {
	resp, err := n.criService().Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		return 0, err
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil || info.Pid <= 1 {
		return 0, fmt.Errorf("container %s: no pid in the runtime's info (%v)", id, err)
	}
	return info.Pid, nil
}

// floorPod is one pod as the harness itself asks the runtime for it:
// RunPodSandbox, CreateContainer, StartContainer, nothing else.
type floorPod struct {
	name        string
	hostNetwork bool
	command     []string
}

// runFloor starts pods all at once with direct CRI calls and returns, for
// each, the time from start to its container started by the runtime's own
// clock, and the sandboxes to remove.
func runFloor(ctx context.Context, n nodeUnderTest, pods []floorPod) ([]time.Duration, []string, error) {
	ids := make([]string, len(pods))
	errs := make([]error, len(pods))
	started := make([]time.Time, len(pods))
	begin := time.Now()
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			ids[i], errs[i] = runFloorPod(ctx, n, p, &started[i])
		})
	}
	wg.Wait()
	var out []time.Duration
	var sandboxes []string
	for i := range pods {
		if ids[i] != "" {
			sandboxes = append(sandboxes, ids[i])
		}
		if errs[i] != nil {
			return nil, sandboxes, fmt.Errorf("floor pod %s: %w", pods[i].name, errs[i])
		}
		out = append(out, started[i].Sub(begin))
	}
	return out, sandboxes, nil
}

func floorSandbox(p floorPod, logs string) *runtimeapi.PodSandboxConfig {
	ns, hostname := runtimeapi.NamespaceMode_POD, p.name
	if p.hostNetwork {
		ns, hostname = runtimeapi.NamespaceMode_NODE, "" // containerd wants no hostname on the host's network
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: p.name, Namespace: "bench-floor", Uid: p.name},
		Hostname:     hostname,
		LogDirectory: filepath.Join(logs, p.name),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: ns, Pid: runtimeapi.NamespaceMode_CONTAINER},
		}},
	}
}

// startFloorContainer creates and starts attempt of p's container and
// returns its ID and the runtime's start time.
func startFloorContainer(ctx context.Context, cri *runtime.Service, sandboxID string, sb *runtimeapi.PodSandboxConfig, p floorPod, attempt uint32) (string, time.Time, error) {
	cid, err := cri.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "main", Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: busyboxRef},
		Command:  p.command,
		LogPath:  fmt.Sprintf("main/%d.log", attempt),
	}, sb)
	if err != nil {
		return "", time.Time{}, err
	}
	if err := cri.StartContainer(ctx, cid); err != nil {
		return cid, time.Time{}, err
	}
	st, err := cri.ContainerStatus(ctx, cid)
	if err != nil {
		return cid, time.Time{}, err
	}
	return cid, time.Unix(0, st.StartedAt), nil
}

// reactionFloor is the reaction's floor: a pod whose container the harness
// kills and at once replaces through the CRI, as a perfect agent would.
type reactionFloor struct {
	cri       *runtime.Service
	n         nodeUnderTest
	p         floorPod
	sb        *runtimeapi.PodSandboxConfig
	sandbox   string
	container string
	attempt   uint32
}

// startReactionFloor runs the floor's pod on n's runtime; remove removes it.
func startReactionFloor(ctx context.Context, n nodeUnderTest) (*reactionFloor, error) {
	f := &reactionFloor{cri: n.criService(), n: n, p: floorPod{name: "react-floor", hostNetwork: true, command: sleepCommand}}
	f.sb = floorSandbox(f.p, filepath.Join(n.dir(), "floor-logs"))
	var err error
	if f.sandbox, err = f.cri.RunPodSandbox(ctx, f.sb); err != nil {
		return nil, err
	}
	if f.container, _, err = startFloorContainer(ctx, f.cri, f.sandbox, f.sb, f.p, 0); err != nil {
		return nil, errors.Join(err, f.remove(ctx))
	}
	return f, nil
}

// kill kills the floor's container process, creates and starts its
// replacement at once, and returns the time from the kill to the
// runtime's start.
func (f *reactionFloor) kill(ctx context.Context) (time.Duration, error) {
	pid, err := containerPid(ctx, f.n, f.container)
	if err != nil {
		return 0, err
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill pid %d: %w", pid, err)
	}
	f.attempt++
	var started time.Time
	if f.container, started, err = startFloorContainer(ctx, f.cri, f.sandbox, f.sb, f.p, f.attempt); err != nil {
		return 0, err
	}
	return started.Sub(killed), nil
}

func (f *reactionFloor) remove(ctx context.Context) error {
	return removeSandboxes(ctx, f.cri, []string{f.sandbox})
}

func runFloorPod(ctx context.Context, n nodeUnderTest, p floorPod, started *time.Time) (string, error) {
	sb := floorSandbox(p, filepath.Join(n.dir(), "floor-logs"))
	id, err := n.criService().RunPodSandbox(ctx, sb)
	if err != nil {
		return "", err
	}
	_, *started, err = startFloorContainer(ctx, n.criService(), id, sb, p, 0)
	return id, err
}

// removeSandboxes stops and removes what runFloor made. A stop is tried
// again: containerd 1.6 now and then loses its connection to the shim
// while killing a container the harness has just killed ("ttrpc: closed"),
// and the stop is idempotent.
func removeSandboxes(ctx context.Context, cri *runtime.Service, ids []string) error {
	for _, id := range ids {
		stop := wait.Backoff{Steps: 3, Duration: time.Second}
		err := retry.OnError(stop, func(error) bool { return ctx.Err() == nil }, func() error { return cri.StopPodSandbox(ctx, id) })
		if err != nil {
			return err
		}
		if err := cri.RemovePodSandbox(ctx, id); err != nil {
			return err
		}
	}
	return nil
}
