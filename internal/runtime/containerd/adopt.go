package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/atomicfile"
)

// adopt returns the containerd a previous berth left running on this root,
// or nil if there is none. It waits, as launch does, until that
// containerd's CRI is ready: it may still be starting.
func adopt(ctx context.Context, o Options, l layout) (*Managed, error) {
	pid := previousDaemon(l)
	if pid == 0 {
		if probe(ctx, l.Socket) != nil {
			return nil, nil
		}
		// Something answers without a pid file (lost, or never written):
		// the process running this root's config is the one to watch.
		if pid = findDaemon(l); pid != 0 {
			if err := atomicfile.Write(l.PIDFile, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
				o.Log.Warn("containerd: rewriting the pid file failed", "pid", pid, "err", err)
			}
		}
	}
	// With no pid, only the socket says whether it is still there.
	stillRunning := func() bool { return pid == 0 || processAlive(pid) }
	err := waitReady(ctx, clock.RealClock{}, o.StartTimeout, l.Socket, stillRunning)
	if errors.Is(err, errExited) {
		o.Log.Info("containerd from a previous run exited while being adopted; starting a new one", "pid", pid)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("containerd (pid %d) from a previous run is alive but not ready: %w", pid, err)
	}
	snapshotter, err := criSnapshotter(ctx, l.Socket)
	if err != nil {
		return nil, fmt.Errorf("containerd on %s: %w", l.Socket, err)
	}
	o.Log.Info("adopted running containerd", "pid", pid, "address", l.Socket, "snapshotter", snapshotter)
	return &Managed{layout: l, snapshotter: snapshotter, pid: pid, log: o.Log, opts: o}, nil
}

// previousDaemon returns the pid in the pid file if that process is alive
// and is a containerd running this root's config; 0 otherwise (no file, a
// dead process, or a pid reused by something else).
func previousDaemon(l layout) int {
	b, err := os.ReadFile(l.PIDFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !runsConfig(pid, l.Config) {
		return 0
	}
	return pid
}

// findDaemon returns the live process running this root's config, or 0.
func findDaemon(l layout) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && pid > 1 && runsConfig(pid, l.Config) {
			return pid
		}
	}
	return 0
}

// runsConfig reports whether pid is alive with config among its arguments
// (a zombie has none).
func runsConfig(pid int, config string) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	return slices.Contains(strings.Split(string(cmdline), "\x00"), config) && processAlive(pid)
}

// criSnapshotter asks a running containerd's CRI plugin which snapshotter
// it uses: for an adopted containerd, its own config is the truth.
func criSnapshotter(ctx context.Context, socket string) (string, error) {
	c, err := newClient(socket)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return criSnapshotterOf(ctx, c)
}

func criSnapshotterOf(ctx context.Context, c *client.Client) (string, error) {
	conn, ok := c.Conn().(*grpc.ClientConn)
	if !ok {
		return "", errors.New("containerd client has no gRPC connection")
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return "", fmt.Errorf("CRI status: %w", err)
	}
	return snapshotterFromCRIInfo(resp.GetInfo())
}

// snapshotterFromCRIInfo reads containerd.snapshotter from the "config"
// entry of a verbose CRI status.
func snapshotterFromCRIInfo(info map[string]string) (string, error) {
	var cfg struct {
		Containerd struct {
			Snapshotter string `json:"snapshotter"`
		} `json:"containerd"`
	}
	raw, ok := info["config"]
	if !ok {
		return "", errors.New(`CRI status has no "config" info`)
	}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return "", fmt.Errorf(`CRI status "config" info: %w`, err)
	}
	if cfg.Containerd.Snapshotter == "" {
		return "", errors.New(`CRI status "config" info names no containerd.snapshotter`)
	}
	return cfg.Containerd.Snapshotter, nil
}
