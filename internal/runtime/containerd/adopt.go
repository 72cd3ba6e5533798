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
	"syscall"

	"github.com/containerd/containerd/v2/client"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// adopt returns the containerd a previous berth left running on this root,
// or nil if there is none.
func adopt(ctx context.Context, o Options, l layout) (*Managed, error) {
	pid := previousDaemon(l)
	if pid != 0 {
		// It may still be starting up: allow it the whole start timeout.
		stillRunning := func() bool { return processAlive(pid) }
		err := waitReady(ctx, clock.RealClock{}, o.StartTimeout, l.Socket, stillRunning)
		if errors.Is(err, errExited) {
			o.Log.Info("containerd from a previous run exited while being adopted; starting a new one", "pid", pid)
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("containerd (pid %d) from a previous run is alive but does not answer on %s: %w", pid, l.Socket, err)
		}
	} else if probe(ctx, l.Socket) != nil {
		return nil, nil
	}
	snapshotter, err := criSnapshotter(ctx, l.Socket)
	if err != nil {
		return nil, fmt.Errorf("containerd on %s: %w", l.Socket, err)
	}
	o.Log.Info("adopted running containerd", "pid", pid, "address", l.Socket, "snapshotter", snapshotter)
	return &Managed{layout: l, snapshotter: snapshotter, pid: pid, log: o.Log}, nil
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
	if err != nil || pid <= 0 {
		return 0
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return 0
	}
	if !slices.Contains(strings.Split(string(cmdline), "\x00"), l.Config) {
		return 0
	}
	return pid
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
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
