package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Runtime is what the rotator asks of the container runtime.
type Runtime interface {
	ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error)
	ReopenContainerLog(ctx context.Context, id string) error
}

// RotatorOptions configure a Rotator.
type RotatorOptions struct {
	Policy Policy
	// Workers is how many containers' logs are rotated at once (at least 1).
	Workers int
	// Interval is how often the logs' sizes are checked.
	Interval time.Duration
	// Clock drives the interval and names rotated files; nil is the real
	// clock.
	Clock clock.WithTicker
	Log   *slog.Logger
	// LogFile is where the agent told the runtime to put a listed
	// container's log, "" when it cannot say; nil: always ask. Where that
	// file is there, the round needs no ContainerStatus call for the
	// container (the kubelet asks for every running container every
	// interval); otherwise the runtime's ContainerStatus says where the log
	// is.
	LogFile func(*runtimeapi.Container) string
}

// Rotator keeps the logs of running containers within a policy, as the
// kubelet's containerLogManager does: every interval, a log that has
// reached MaxSize is renamed aside and the runtime reopens it; older
// rotated files are compressed, and the oldest removed.
type Rotator struct {
	rt   Runtime
	opts RotatorOptions
	clk  clock.WithTicker
	log  *slog.Logger
	// failing holds the containers whose last rotation failed, so that a
	// lasting failure is logged once, not every interval (its error may
	// change from round to round: a rotated name has the time in it). Only
	// Run's goroutine uses it.
	failing map[string]bool
}

// NewRotator returns a rotator; Run starts it.
func NewRotator(rt Runtime, opts RotatorOptions) *Rotator {
	r := &Rotator{rt: rt, opts: opts, clk: opts.Clock, log: opts.Log, failing: map[string]bool{}}
	if r.clk == nil {
		r.clk = clock.RealClock{}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.opts.Workers = max(r.opts.Workers, 1)
	return r
}

// Run checks the logs every interval until ctx ends.
func (r *Rotator) Run(ctx context.Context) {
	if r.opts.Policy.MaxSize < 0 {
		r.log.Info("container log rotation is off (containerLogMaxSize is negative)")
		return
	}
	r.log.Info("rotating container logs", "maxSize", r.opts.Policy.MaxSize, "maxFiles", r.opts.Policy.MaxFiles,
		"workers", r.opts.Workers, "interval", r.opts.Interval)
	ticker := r.clk.NewTicker(r.opts.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			r.RotateOnce(ctx)
		}
	}
}

// RotateOnce checks every running container's log once and rotates those
// that have grown past MaxSize. A round ends before the next begins, so a
// log is never rotated by two workers at once (the kubelet's work queue
// gives the same guarantee).
func (r *Rotator) RotateOnce(ctx context.Context) {
	containers, err := r.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		r.log.Warn("container log rotation: listing containers", "err", err)
		return
	}
	// Only running containers: one that has exited writes nothing more,
	// and an empty new log would hide its last lines.
	var ids, expected []string
	for _, c := range containers {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			ids = append(ids, c.GetId())
			expected = append(expected, r.expectedLog(c))
		}
	}
	errs := make([]error, len(ids))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(r.opts.Workers, len(ids)) {
		wg.Go(func() {
			for i := range next {
				errs[i] = r.rotateContainer(ctx, ids[i], expected[i])
			}
		})
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	r.report(ids, errs)
}

// report logs a container's failure when it starts and its recovery when
// it ends, so that a log that cannot be rotated (a full disk,
// a file made immutable) costs one line, not one per interval.
func (r *Rotator) report(ids []string, errs []error) {
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		seen[id] = true
		failed := r.failing[id]
		switch err := errs[i]; {
		case err == nil && failed:
			r.log.Info("container log rotation recovered", "containerID", id)
			delete(r.failing, id)
		case err != nil && !failed:
			r.log.Warn("container log rotation failed; the container keeps running, the next round retries",
				"containerID", id, "err", err)
			r.failing[id] = true
		case err != nil:
			r.log.Debug("container log rotation still failing", "containerID", id, "err", err)
		}
	}
	for id := range r.failing {
		if !seen[id] {
			delete(r.failing, id)
		}
	}
}

func (r *Rotator) expectedLog(c *runtimeapi.Container) string {
	if r.opts.LogFile == nil {
		return ""
	}
	return r.opts.LogFile(c)
}

// rotateContainer rotates one container's log if it needs it; expected is
// where the log should be, "" when unknown.
func (r *Rotator) rotateContainer(ctx context.Context, id, expected string) error {
	path, info, err := r.findLog(ctx, id, expected)
	if err != nil || path == "" {
		return err
	}
	if info.Size() < r.opts.Policy.MaxSize {
		return nil // the common case: no need to list the directory
	}
	siblings, err := readDirNames(dirOf(path))
	if err != nil {
		return fmt.Errorf("listing the logs beside %s: %w", path, err)
	}
	plan := planRotation(path, info.Size(), siblings, r.clk.Now(), r.opts.Policy)
	return r.apply(ctx, id, path, plan)
}

// findLog is the path and size of the container's log, "" for a
// container without one. The expected file, if it is there, is taken at
// its word; otherwise the runtime names the file.
func (r *Rotator) findLog(ctx context.Context, id, expected string) (string, os.FileInfo, error) {
	if expected != "" {
		if info, err := os.Stat(expected); err == nil {
			return expected, info, nil
		}
	}
	status, err := r.rt.ContainerStatus(ctx, id)
	if err != nil {
		return "", nil, fmt.Errorf("container status: %w", err)
	}
	path := status.GetLogPath()
	if path == "" {
		return "", nil, nil // a container without a log file
	}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Removed under the runtime: have it create the file again, as the
		// kubelet does, so that the container's output lands somewhere.
		if err := r.rt.ReopenContainerLog(ctx, id); err != nil {
			return "", nil, fmt.Errorf("log %s is missing and reopening it failed: %w", path, err)
		}
		info, err = os.Stat(path)
	}
	if err != nil {
		return "", nil, fmt.Errorf("log %s: %w", path, err)
	}
	return path, info, nil
}

// prune carries out the first steps of a rotation plan, common to both
// ways of rotating: the old logs removed, the rotated ones compressed.
func prune(plan rotation) error {
	for _, name := range plan.remove {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing an old log: %w", err)
		}
	}
	for _, name := range plan.compress {
		if err := compressFile(name); err != nil {
			return err
		}
	}
	return nil
}

// apply carries out a rotation plan.
func (r *Rotator) apply(ctx context.Context, id, path string, plan rotation) error {
	if err := prune(plan); err != nil {
		return err
	}
	if plan.rotated == "" {
		return nil
	}
	if err := os.Rename(path, plan.rotated); err != nil {
		return fmt.Errorf("rotating the log: %w", err)
	}
	if err := r.rt.ReopenContainerLog(ctx, id); err != nil {
		// Put the log back so that the next round tries again; the runtime
		// still writes to it.
		if berr := os.Rename(plan.rotated, path); berr != nil {
			r.log.Error("putting back a rotated log whose container could not reopen it: its output is lost until the next rotation",
				"containerID", id, "path", path, "err", berr)
		}
		return fmt.Errorf("reopening the log %s: %w", path, err)
	}
	return nil
}

// compressFile gzips name to name.gz through a temporary file, then removes
// name. An interruption leaves a .tmp file or both copies behind, which the
// next rotation's plan removes.
func compressFile(name string) (err error) {
	in, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("compressing a rotated log: %w", err)
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return fmt.Errorf("compressing a rotated log: %w", err)
	}
	tmp := name + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return fmt.Errorf("compressing a rotated log: %w", err)
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	zw := gzip.NewWriter(out)
	if _, err := io.Copy(zw, in); err != nil {
		return fmt.Errorf("compressing %s: %w", name, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", name, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", name, err)
	}
	if err := os.Rename(tmp, name+compressedSuffix); err != nil {
		return fmt.Errorf("compressing %s: %w", name, err)
	}
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("removing %s once compressed: %w", name, err)
	}
	return nil
}

func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func dirOf(path string) string {
	dir, _ := splitPath(path)
	if dir == "" {
		return "."
	}
	return dir
}
