package containergc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/runtime"
)

// minGracePeriod is the kubelet's minimumGracePeriodInSeconds: a container
// is always given that long to stop before SIGKILL.
const minGracePeriod = 2

// GarbageCollect runs one periodic pass (the kubelet's containerGC
// GarbageCollect): the removals that failed are returned, aggregated.
func (m *Manager) GarbageCollect(ctx context.Context) error {
	_, err := m.Collect(ctx, false)
	return err
}

// DeleteAllUnusedContainers is the eviction manager's reclaim: one pass in
// which terminal pods, not only gone ones, lose all their dead containers
// and sandboxes.
func (m *Manager) DeleteAllUnusedContainers(ctx context.Context) error {
	m.log.Info("Attempting to delete unused containers")
	_, err := m.Collect(ctx, true)
	return err
}

// Collect runs one pass, after any pass in progress, and returns what it
// removed. evictNonDeletedPods is the reclaim path. It fails without
// removing anything when the runtime cannot list berth's sandboxes or
// containers; otherwise every removal is tried and the failures are
// returned, aggregated, with what the others removed.
func (m *Manager) Collect(ctx context.Context, evictNonDeletedPods bool) (Result, error) {
	select {
	case m.pass <- struct{}{}:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	defer func() { <-m.pass }()

	in := Input{
		Now:                 m.clk.Now(),
		Policy:              m.policy,
		AllSourcesReady:     m.sourcesReady(),
		EvictNonDeletedPods: evictNonDeletedPods,
		Pods:                m.pods,
	}
	var err error
	if in.Sandboxes, in.Containers, err = m.list(ctx); err != nil {
		return Result{}, err
	}
	var errs []error
	if in.AllSourcesReady {
		if in.PodLogDirs, err = readPodLogDirs(m.podLogsDir); err != nil {
			m.metrics.errors.WithLabelValues(opReadPodLogsDir).Inc()
			errs = append(errs, err)
		}
	}
	res, err := m.apply(ctx, Choose(in))
	errs = append(errs, err)
	if res != (Result{}) {
		m.log.Info("Container garbage collection removed dead objects",
			"containers", res.Containers, "sandboxes", res.Sandboxes, "podLogDirs", res.PodLogDirs, "reclaim", evictNonDeletedPods)
	}
	return res, errors.Join(errs...)
}

// managed selects what berth created, so that the GC never sees, let alone
// removes, what another client of the runtime made.
func managed() map[string]string { return map[string]string{container.LabelManagedBy: "true"} }

// list returns berth's sandboxes, then its containers. Sandboxes go first so
// that a container created meanwhile in a listed sandbox is listed too and
// keeps that sandbox.
func (m *Manager) list(ctx context.Context) ([]Sandbox, []Container, error) {
	lctx, cancel := context.WithTimeout(ctx, runtime.ListTimeout)
	sbs, err := m.runtime.ListPodSandboxes(lctx, &runtimeapi.PodSandboxFilter{LabelSelector: managed()})
	cancel()
	if err != nil {
		m.metrics.errors.WithLabelValues(opListSandboxes).Inc()
		return nil, nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	lctx, cancel = context.WithTimeout(ctx, runtime.ListTimeout)
	cs, err := m.runtime.ListContainers(lctx, &runtimeapi.ContainerFilter{LabelSelector: managed()})
	cancel()
	if err != nil {
		m.metrics.errors.WithLabelValues(opListContainers).Inc()
		return nil, nil, fmt.Errorf("list containers: %w", err)
	}
	return sandboxesFrom(sbs), containersFrom(cs), nil
}

func sandboxesFrom(list []*runtimeapi.PodSandbox) []Sandbox {
	out := make([]Sandbox, 0, len(list))
	for _, s := range list {
		// A runtime that ignores the selector must not make berth remove
		// another client's sandbox.
		if s.GetLabels()[container.LabelManagedBy] != "true" {
			continue
		}
		uid := s.GetMetadata().GetUid()
		if uid == "" {
			uid = s.GetLabels()[container.LabelPodUID]
		}
		out = append(out, Sandbox{
			ID:        s.GetId(),
			PodUID:    types.UID(uid),
			State:     s.GetState(),
			CreatedAt: time.Unix(0, s.GetCreatedAt()),
		})
	}
	return out
}

func containersFrom(list []*runtimeapi.Container) []Container {
	out := make([]Container, 0, len(list))
	for _, c := range list {
		ctr := Container{
			ID:        c.GetId(),
			SandboxID: c.GetPodSandboxId(),
			State:     c.GetState(),
			CreatedAt: time.Unix(0, c.GetCreatedAt()),
		}
		// Another client's container (from a runtime that ignores the
		// selector) gets no pod UID, so it is never removed; it still keeps
		// the sandbox it is in.
		if c.GetLabels()[container.LabelManagedBy] == "true" {
			ctr.PodUID = types.UID(c.GetLabels()[container.LabelPodUID])
			ctr.Name = c.GetMetadata().GetName()
			if ctr.Name == "" {
				ctr.Name = c.GetLabels()[container.LabelContainerName]
			}
			ctr.GracePeriod, _ = strconv.ParseInt(c.GetAnnotations()[container.AnnotationTerminationGracePeriod], 10, 64)
		}
		out = append(out, ctr)
	}
	return out
}

// apply carries out a plan. A sandbox whose container failed to go is kept
// (removing it would take the container with it), and so is the log
// directory of a pod whose container or sandbox failed to go.
func (m *Manager) apply(ctx context.Context, plan Plan) (Result, error) {
	var res Result
	var errs []error
	keepSandbox := map[string]bool{}
	keepLogs := map[types.UID]bool{}
	for _, c := range plan.Containers {
		if err := ctx.Err(); err != nil {
			return res, errors.Join(append(errs, err)...)
		}
		if err := m.removeContainer(ctx, c); err != nil {
			errs = append(errs, err)
			keepSandbox[c.SandboxID], keepLogs[c.PodUID] = true, true
			continue
		}
		res.Containers++
		m.metrics.removed.WithLabelValues(objContainer).Inc()
	}
	for _, s := range plan.Sandboxes {
		if err := ctx.Err(); err != nil {
			return res, errors.Join(append(errs, err)...)
		}
		if keepSandbox[s.ID] {
			keepLogs[s.PodUID] = true
			continue
		}
		if err := m.removeSandbox(ctx, s); err != nil {
			errs = append(errs, err)
			keepLogs[s.PodUID] = true
			continue
		}
		res.Sandboxes++
		m.metrics.removed.WithLabelValues(objSandbox).Inc()
	}
	for _, d := range plan.PodLogDirs {
		if keepLogs[d.PodUID] {
			continue
		}
		path := filepath.Join(m.podLogsDir, d.Name)
		m.log.Debug("Removing pod logs", "podUID", d.PodUID, "path", path)
		if err := os.RemoveAll(path); err != nil {
			m.metrics.errors.WithLabelValues(opRemovePodLogDir).Inc()
			errs = append(errs, fmt.Errorf("remove the log directory of pod %s: %w", d.PodUID, err))
			continue
		}
		res.PodLogDirs++
		m.metrics.removed.WithLabelValues(objPodLogDir).Inc()
	}
	return res, errors.Join(errs...)
}

// removeContainer removes a container's logs, then the container (the
// kubelet's removeContainer). One in an unknown state may still be running,
// so it is stopped first. A container the runtime no longer has is removed.
func (m *Manager) removeContainer(ctx context.Context, c ContainerRemoval) error {
	log := m.log.With("containerID", c.ID, "podUID", c.PodUID, "container", c.Name)
	log.Debug("Removing container", "reason", c.Reason)
	if c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
		grace := max(c.GracePeriod, minGracePeriod)
		log.Info("Container is in unknown state, try killing it before removal", "gracePeriod", grace)
		err := withTimeout(ctx, runtime.DefaultCallTimeout+time.Duration(grace)*time.Second, func(ctx context.Context) error {
			return m.runtime.StopContainer(ctx, c.ID, grace)
		})
		if runtime.IsNotFound(err) {
			return nil
		}
		if err != nil {
			m.metrics.errors.WithLabelValues(opStopContainer).Inc()
			return fmt.Errorf("stop container %s (%s of pod %s) in an unknown state before removing it: %w", c.ID, c.Name, c.PodUID, err)
		}
	}
	var status *runtimeapi.ContainerStatus
	err := withTimeout(ctx, runtime.ListTimeout, func(ctx context.Context) (err error) {
		status, err = m.runtime.ContainerStatus(ctx, c.ID)
		return err
	})
	if runtime.IsNotFound(err) {
		return nil
	}
	if err != nil {
		m.metrics.errors.WithLabelValues(opContainerStatus).Inc()
		return fmt.Errorf("read the status of container %s (%s of pod %s) to find its logs: %w", c.ID, c.Name, c.PodUID, err)
	}
	// The runtime's log path is the one the container wrote to; only a
	// path inside berth's pod logs directory is berth's to remove.
	if p := status.GetLogPath(); p != "" {
		if !within(m.podLogsDir, filepath.Clean(p)) {
			log.Warn("Leaving the container's log file: it is not in the pod logs directory", "path", p, "podLogsDir", m.podLogsDir)
		} else if err := removeContainerLogs(filepath.Clean(p)); err != nil {
			m.metrics.errors.WithLabelValues(opRemoveLog).Inc()
			return fmt.Errorf("remove the logs of container %s (%s of pod %s): %w", c.ID, c.Name, c.PodUID, err)
		}
	}
	err = withTimeout(ctx, runtime.DefaultCallTimeout, func(ctx context.Context) error {
		return m.runtime.RemoveContainer(ctx, c.ID)
	})
	if err != nil && !runtime.IsNotFound(err) {
		m.metrics.errors.WithLabelValues(opRemoveContainer).Inc()
		return fmt.Errorf("remove container %s (%s of pod %s): %w", c.ID, c.Name, c.PodUID, err)
	}
	return nil
}

// removeSandbox stops, then removes a sandbox (the kubelet's removeSandbox):
// a sandbox not ready may still hold its network if stopping it failed
// earlier.
func (m *Manager) removeSandbox(ctx context.Context, s SandboxRemoval) error {
	m.log.Debug("Removing sandbox", "sandboxID", s.ID, "podUID", s.PodUID, "reason", s.Reason)
	err := withTimeout(ctx, runtime.DefaultCallTimeout, func(ctx context.Context) error {
		return m.runtime.StopPodSandbox(ctx, s.ID)
	})
	if runtime.IsNotFound(err) {
		return nil
	}
	if err != nil {
		m.metrics.errors.WithLabelValues(opStopSandbox).Inc()
		return fmt.Errorf("stop sandbox %s of pod %s before removing it: %w", s.ID, s.PodUID, err)
	}
	err = withTimeout(ctx, runtime.DefaultCallTimeout, func(ctx context.Context) error {
		return m.runtime.RemovePodSandbox(ctx, s.ID)
	})
	if err != nil && !runtime.IsNotFound(err) {
		m.metrics.errors.WithLabelValues(opRemoveSandbox).Inc()
		return fmt.Errorf("remove sandbox %s of pod %s: %w", s.ID, s.PodUID, err)
	}
	return nil
}

// withTimeout runs f under ctx bounded by d: a backstop for a runtime
// without deadlines of its own.
func withTimeout(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return f(ctx)
}
