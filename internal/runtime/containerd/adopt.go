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
	err := waitReady(ctx, clock.RealClock{}, o.StartTimeout, l.Socket, stillRunning, !o.NetworkLater)
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
	m := &Managed{layout: l, snapshotter: snapshotter, pid: pid, log: o.Log, opts: o}
	if pid > 0 {
		if m.ident, err = claim(l, pid, o.Log); err != nil {
			// It died since it answered: the supervisor starts another.
			o.Log.Warn("containerd: cannot record the adopted containerd", "err", err)
		}
	}
	o.Log.Info("adopted running containerd", "pid", pid, "address", l.Socket, "snapshotter", snapshotter, "recorded", m.ident.PID > 0)
	return m, nil
}

// stopAdopted stops an adopted containerd as stop stops a launched one,
// but by its pid, which is not berth's child: SIGTERM, and SIGKILL if ctx
// ends before it exits. Each signal goes only to the process recorded.
func (m *Managed) stopAdopted(ctx context.Context) error {
	if !m.stillRecorded() {
		m.log.Warn("adopted containerd had already exited", "pid", m.pid)
		return nil
	}
	if err := syscall.Kill(m.pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal containerd (pid %d): %w", m.pid, err)
	}
	err := waitPidExit(ctx, m.pid, clock.RealClock{})
	if err == nil {
		m.log.Info("containerd stopped", "pid", m.pid, "adopted", true)
		return nil
	}
	err = fmt.Errorf("adopted containerd (pid %d) did not exit after SIGTERM, killed it: %w", m.pid, err)
	if m.stillRecorded() {
		if killErr := syscall.Kill(m.pid, syscall.SIGKILL); killErr != nil && !errors.Is(killErr, syscall.ESRCH) {
			return errors.Join(err, fmt.Errorf("kill containerd (pid %d): %w", m.pid, killErr))
		}
	}
	killCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killWait)
	defer cancel()
	if waitErr := waitPidExit(killCtx, m.pid, clock.RealClock{}); waitErr != nil {
		err = errors.Join(err, fmt.Errorf("containerd (pid %d) still running %v after SIGKILL", m.pid, killWait))
	}
	return err
}

// stillRecorded reports whether the process at m.pid is the one recorded
// at adoption, not one that took its pid since.
func (m *Managed) stillRecorded() bool {
	live, err := ProcessIdentity(m.pid)
	return err == nil && m.ident.Names(live)
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
	name, err := snapshotterFromCRIInfo(resp.GetInfo())
	if !errors.Is(err, errNoSnapshotterInfo) {
		return name, err
	}
	// containerd 2 moved the snapshotter to its CRI images plugin, whose
	// config the status leaves out; the image filesystem it reports is the
	// snapshotter's own directory.
	fs, fsErr := runtimeapi.NewImageServiceClient(conn).ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if fsErr != nil {
		return "", fmt.Errorf("%w; CRI image fs info: %w", err, fsErr)
	}
	for _, f := range fs.GetImageFilesystems() {
		if name, ok := snapshotterFromMountpoint(f.GetFsId().GetMountpoint()); ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w, and no image filesystem is a snapshotter's", err)
}

// snapshotterFromMountpoint reads the snapshotter's name from its root
// directory, <containerd root>/io.containerd.snapshotter.v1.<name>.
func snapshotterFromMountpoint(mountpoint string) (string, bool) {
	name, ok := strings.CutPrefix(filepath.Base(mountpoint), "io.containerd.snapshotter.v1.")
	if !ok || name == "" {
		return "", false
	}
	return name, true
}

var errNoSnapshotterInfo = errors.New(`CRI status "config" info names no containerd.snapshotter`)

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
		return "", errNoSnapshotterInfo
	}
	return cfg.Containerd.Snapshotter, nil
}
