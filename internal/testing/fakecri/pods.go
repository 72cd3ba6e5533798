package fakecri

import (
	"context"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// AddSandbox puts a sandbox in the runtime as if it had been created
// earlier; Id, State and CreatedAt are kept as given (an empty Id gets one).
func (r *Runtime) AddSandbox(pb *runtimeapi.PodSandbox, ip string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, seq := r.stamp()
	pb = cloneSandbox(pb)
	if pb.Id == "" {
		pb.Id = newID("sb-", seq)
	}
	r.sandboxes[pb.Id] = &sandbox{seq: seq, pb: pb, ip: ip}
	return pb.Id
}

// AddContainer puts a container in the runtime as if it had been created
// earlier. st may be nil: then its status is made of pb. It returns the
// container's ID.
func (r *Runtime) AddContainer(pb *runtimeapi.Container, st *runtimeapi.ContainerStatus) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, seq := r.stamp()
	pb = cloneContainer(pb)
	if pb.Id == "" {
		pb.Id = newID("c-", seq)
	}
	if st == nil {
		st = &runtimeapi.ContainerStatus{}
	} else {
		st = cloneStatus(st)
	}
	st.Id, st.State, st.CreatedAt = pb.Id, pb.State, pb.CreatedAt
	if st.Metadata == nil {
		st.Metadata = pb.Metadata
	}
	if st.Labels == nil {
		st.Labels = pb.Labels
	}
	if st.Annotations == nil {
		st.Annotations = pb.Annotations
	}
	r.containers[pb.Id] = &ctr{seq: seq, pb: pb, st: st}
	return pb.Id
}

// Exit makes a container exit, as a process that ends with code.
func (r *Runtime) Exit(id string, code int32, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.containers[id]; c != nil {
		r.exitLocked(c, code, reason)
	}
}

func (r *Runtime) exitLocked(c *ctr, code int32, reason string) {
	now, _ := r.stamp()
	c.pb.State, c.st.State = runtimeapi.ContainerState_CONTAINER_EXITED, runtimeapi.ContainerState_CONTAINER_EXITED
	c.st.FinishedAt, c.st.ExitCode, c.st.Reason = now, code, reason
}

// SetSandboxState changes a sandbox's state, as a runtime that lost it.
func (r *Runtime) SetSandboxState(id string, state runtimeapi.PodSandboxState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.sandboxes[id]; s != nil {
		s.pb.State = state
	}
}

// Sandboxes and Containers return the IDs of what the runtime holds, sorted.
func (r *Runtime) Sandboxes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.sandboxes))
}

func (r *Runtime) Containers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.containers))
}

// Container returns a copy of a container's status, nil when there is none.
func (r *Runtime) Container(id string) *runtimeapi.ContainerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.containers[id]; c != nil {
		return cloneStatus(c.st)
	}
	return nil
}

// ContainerConfig returns the config a container was created with, nil
// for one that CreateContainer did not make.
func (r *Runtime) ContainerConfig(id string) *runtimeapi.ContainerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.containers[id]; c != nil {
		return c.cfg
	}
	return nil
}

// SetContainerStats sets what ListContainerStats answers.
func (r *Runtime) SetContainerStats(stats []*runtimeapi.ContainerStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats = stats
}

// SetImageFsInfo sets what ImageFsInfo answers.
func (r *Runtime) SetImageFsInfo(info *runtimeapi.ImageFsInfoResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.imageFs = info
}

func (r *Runtime) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.begin(ctx, "RunPodSandbox", cfg.GetMetadata().GetUid()); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now, seq := r.stamp()
	id := newID("sb-", seq)
	ip := "10.88.0." + strconv.Itoa(seq%250+2)
	if cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE {
		ip = ""
	}
	r.sandboxes[id] = &sandbox{seq: seq, ip: ip, cfg: cfg, pb: &runtimeapi.PodSandbox{
		Id: id, Metadata: cfg.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: now,
		Labels: maps.Clone(cfg.Labels), Annotations: maps.Clone(cfg.Annotations),
	}}
	return id, nil
}

func (r *Runtime) StopPodSandbox(ctx context.Context, id string) error {
	if err := r.begin(ctx, "StopPodSandbox", id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sandboxes[id]
	if s == nil {
		return NotFound("sandbox " + id)
	}
	s.pb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	for _, c := range r.containers {
		if c.pb.PodSandboxId == id && c.pb.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			r.exitLocked(c, r.stopExitCode, "Error")
		}
	}
	return nil
}

func (r *Runtime) RemovePodSandbox(ctx context.Context, id string) error {
	if err := r.begin(ctx, "RemovePodSandbox", id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sandboxes[id] == nil {
		return NotFound("sandbox " + id)
	}
	delete(r.sandboxes, id)
	for cid, c := range r.containers {
		if c.pb.PodSandboxId == id {
			delete(r.containers, cid)
		}
	}
	return nil
}

func (r *Runtime) PodSandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	if err := r.begin(ctx, "PodSandboxStatus", id); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sandboxes[id]
	if s == nil {
		return nil, NotFound("sandbox " + id)
	}
	return sandboxStatusLocked(s), nil
}

func sandboxStatusLocked(s *sandbox) *runtimeapi.PodSandboxStatus {
	st := &runtimeapi.PodSandboxStatus{
		Id: s.pb.Id, Metadata: s.pb.Metadata, State: s.pb.State, CreatedAt: s.pb.CreatedAt,
		Labels: s.pb.Labels, Annotations: s.pb.Annotations,
	}
	if s.ip != "" {
		st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: s.ip}
	}
	if ns := s.cfg.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns != nil {
		st.Linux = &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: ns}}
	}
	return st
}

func (r *Runtime) ListPodSandboxes(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	defer r.listed(ctx, "ListPodSandboxes")
	if err := r.begin(ctx, "ListPodSandboxes", ""); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for _, id := range slices.Sorted(maps.Keys(r.sandboxes)) {
		s := r.sandboxes[id].pb
		switch {
		case f.GetId() != "" && f.GetId() != id:
		case f.GetState() != nil && f.GetState().GetState() != s.State:
		case !matches(s.Labels, f.GetLabelSelector()):
		default:
			out = append(out, cloneSandbox(s))
		}
	}
	return out, nil
}

func (r *Runtime) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.begin(ctx, "CreateContainer", cfg.GetMetadata().GetName()); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sandboxes[sandboxID] == nil {
		return "", NotFound("sandbox " + sandboxID)
	}
	img := r.findImageLocked(cfg.GetImage().GetImage())
	if img == nil {
		return "", NotFound("image " + cfg.GetImage().GetImage())
	}
	now, seq := r.stamp()
	id := newID("c-", seq)
	state := runtimeapi.ContainerState_CONTAINER_CREATED
	pb := &runtimeapi.Container{
		Id: id, PodSandboxId: sandboxID, Metadata: cfg.Metadata, Image: cfg.Image, ImageRef: img.Id,
		State: state, CreatedAt: now, Labels: maps.Clone(cfg.Labels), Annotations: maps.Clone(cfg.Annotations),
	}
	st := &runtimeapi.ContainerStatus{
		Id: id, Metadata: cfg.Metadata, State: state, CreatedAt: now, Image: cfg.Image, ImageRef: img.Id,
		Labels: pb.Labels, Annotations: pb.Annotations, LogPath: logPath(r.sandboxes[sandboxID], cfg),
	}
	r.containers[id] = &ctr{seq: seq, pb: pb, st: st, cfg: cfg}
	return id, nil
}

func logPath(s *sandbox, cfg *runtimeapi.ContainerConfig) string {
	if s.cfg.GetLogDirectory() == "" || cfg.GetLogPath() == "" {
		return ""
	}
	return s.cfg.GetLogDirectory() + "/" + cfg.GetLogPath()
}

func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	if err := r.begin(ctx, "StartContainer", id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	if c == nil {
		return NotFound("container " + id)
	}
	if c.pb.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return failedPrecondition("container " + id + " is not created")
	}
	now, _ := r.stamp()
	c.pb.State, c.st.State = runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_RUNNING
	c.st.StartedAt = now
	return nil
}

func (r *Runtime) StopContainer(ctx context.Context, id string, gracePeriod int64) error {
	if err := r.begin(ctx, "StopContainer", id, strconv.FormatInt(gracePeriod, 10)); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	if c == nil {
		return NotFound("container " + id)
	}
	if c.pb.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		r.exitLocked(c, r.stopExitCode, "Error")
	}
	return nil
}

func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	if err := r.begin(ctx, "RemoveContainer", id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.containers[id] == nil {
		return NotFound("container " + id)
	}
	delete(r.containers, id)
	return nil
}

func (r *Runtime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	defer r.listed(ctx, "ListContainers")
	if err := r.begin(ctx, "ListContainers", ""); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Container
	for _, id := range slices.Sorted(maps.Keys(r.containers)) {
		c := r.containers[id].pb
		switch {
		case f.GetId() != "" && f.GetId() != id:
		case f.GetPodSandboxId() != "" && f.GetPodSandboxId() != c.PodSandboxId:
		case f.GetState() != nil && f.GetState().GetState() != c.State:
		case !matches(c.Labels, f.GetLabelSelector()):
		default:
			out = append(out, cloneContainer(c))
		}
	}
	return out, nil
}

func (r *Runtime) ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	if err := r.begin(ctx, "ContainerStatus", id); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	if c == nil {
		return nil, NotFound("container " + id)
	}
	return cloneStatus(c.st), nil
}

func (r *Runtime) ExecSync(ctx context.Context, id string, cmd []string, _ time.Duration) ([]byte, []byte, int32, error) {
	if err := r.begin(ctx, "ExecSync", id); err != nil {
		return nil, nil, 0, err
	}
	r.mu.Lock()
	c, exec := r.containers[id], r.exec
	r.mu.Unlock()
	if c == nil {
		return nil, nil, 0, NotFound("container " + id)
	}
	if exec == nil {
		return nil, nil, 0, nil
	}
	stdout, stderr, code := exec(id, cmd)
	return stdout, stderr, code, nil
}

// ReopenContainerLog creates the container's log file again, as
// containerd does after the file was rotated away.
func (r *Runtime) ReopenContainerLog(ctx context.Context, id string) error {
	if err := r.begin(ctx, "ReopenContainerLog", id); err != nil {
		return err
	}
	r.mu.Lock()
	c := r.containers[id]
	r.mu.Unlock()
	if c == nil {
		return NotFound("container " + id)
	}
	f, err := os.OpenFile(c.st.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

func (r *Runtime) ListContainerStats(ctx context.Context, _ *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	if err := r.begin(ctx, "ListContainerStats", ""); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.stats), nil
}

func (r *Runtime) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	if err := r.begin(ctx, "ImageFsInfo", ""); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.imageFs, nil
}
