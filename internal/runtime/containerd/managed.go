// Package containerd runs berth's embedded runtime: a containerd child
// process with its config, root, state and socket under berth's root dir
// (the way k3s does it). It also follows containerd's native task event
// stream, which reports exits at once where CRI 1.6 has no event API, and
// imports image tarballs for nodes that cannot pull.
package containerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/imagebuild"

	"github.com/berth-dev/berth/internal/atomicfile"
)

// criNamespace is the containerd namespace the CRI plugin keeps its pods,
// containers and images in.
const criNamespace = "k8s.io"

const (
	// defaultStartTimeout bounds the wait for a containerd to be ready to
	// run pods. Its socket answers within a second, but its CRI plugin
	// first recovers every pod the node has: on a busy 2-core machine with
	// 40 pods that took seconds, and a node may have 110.
	defaultStartTimeout = 2 * time.Minute
	// readyPollInterval paces the wait for the socket: containerd starts
	// in well under a second, and a dial costs next to nothing.
	readyPollInterval = 20 * time.Millisecond
	// criReadyPollInterval paces the wait for the CRI once the socket
	// answers: a Status call is light, but containerd is busy recovering
	// the node's pods then, and seconds go by.
	criReadyPollInterval = 100 * time.Millisecond
	// probeTimeout bounds one readiness probe (a dial and a Version or a
	// CRI Status call).
	probeTimeout = 2 * time.Second
	// killWait bounds the wait for a SIGKILLed containerd to be reaped.
	killWait = 10 * time.Second
	// logTailBytes is how much of containerd.log a start error quotes.
	logTailBytes = 4096
)

// Options configure a managed containerd.
type Options struct {
	// RootDir is berth's root dir; containerd lives under RootDir/containerd.
	RootDir string
	// Binary is the containerd executable; default "containerd" from PATH.
	Binary string
	// CNIBinDir holds the CNI plugins; default /usr/lib/cni (Debian's).
	CNIBinDir string
	// CNIConfDir is where berth writes its CNI conflist; default
	// RootDir/cni/net.d, so that the host's own CNI configs are not used.
	CNIConfDir string
	// NetworkLater says the CNI configuration may come after containerd
	// (the host's, or berth's once the Node has a podCIDR): start waits
	// for RuntimeReady only, and the node reports NetworkReady meanwhile.
	NetworkLater bool
	// SandboxImage is the pause image; default imagebuild.PauseImageRef.
	SandboxImage string
	// StartTimeout bounds the wait for containerd to answer and its CRI
	// to be ready (RuntimeReady and NetworkReady); default 2m.
	StartTimeout time.Duration
	// MetricsAddress, "host:port", has containerd serve its Prometheus
	// metrics there (/v1/metrics): among them the gRPC calls it served, by
	// method (grpc_server_handled_total). "" serves none, as by default.
	MetricsAddress string
	Log            *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.RootDir == "" {
		return o, errors.New("containerd: RootDir is required")
	}
	root, err := filepath.Abs(o.RootDir)
	if err != nil {
		return o, fmt.Errorf("containerd: RootDir %q: %w", o.RootDir, err)
	}
	o.RootDir = root
	if o.Binary == "" {
		o.Binary = "containerd"
	}
	// A full path makes the process recognisable in /proc after a restart.
	if o.Binary, err = exec.LookPath(o.Binary); err != nil {
		return o, fmt.Errorf("containerd: binary: %w", err)
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = "/usr/lib/cni"
	}
	if o.CNIConfDir == "" {
		o.CNIConfDir = filepath.Join(o.RootDir, "cni", "net.d")
	}
	if o.SandboxImage == "" {
		o.SandboxImage = imagebuild.PauseImageRef
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = defaultStartTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o, nil
}

// Managed is a containerd that berth started, or adopted from a previous
// berth that died without stopping it.
type Managed struct {
	layout      layout
	snapshotter string
	pid         int // 0 when adopted without a pid file
	startedByUs bool
	// ident is the recorded identity of the containerd (RecordName): Stop
	// signals an adopted one only while the process at pid still is it.
	// Zero for an adopted containerd whose process was not found.
	ident Identity
	log   *slog.Logger
	opts  Options // with defaults: how to start it again

	// Only when started by us: the process and its reaper's results.
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // set before exited is closed

	stopOnce sync.Once
	stopErr  error
}

// Start starts containerd as a child process in its own session, so that
// it outlives a berth killed with SIGKILL, or adopts the one a previous
// berth left running on the same root (its pid file names a live
// containerd, or the socket answers): then StartedByUs is false. Either
// way the containerd is recorded (RecordName) as the one berth manages,
// and Stop stops it.
func Start(ctx context.Context, o Options) (*Managed, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	l := newLayout(o.RootDir)
	if err := l.validate(); err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	if err := os.MkdirAll(l.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	m, err := adopt(ctx, o, l)
	if m == nil && err == nil {
		m, err = launch(ctx, o, l)
	}
	if err != nil {
		return nil, err
	}
	m.reapAndLog(ctx)
	return m, nil
}

// reapAndLog kills the shims containerd forgot and logs them, once
// containerd answers and before berth makes any call to it: no sandbox can
// be in creation. One it could not look for is left for the next time.
func (m *Managed) reapAndLog(ctx context.Context) {
	m.killForgotten(m.forgottenShims(ctx))
}

// Address is the path of containerd's gRPC socket (containerd API and CRI).
func (m *Managed) Address() string { return m.layout.Socket }

// Endpoint is the CRI endpoint, as --container-runtime-endpoint spells it.
func (m *Managed) Endpoint() string { return "unix://" + m.layout.Socket }

// Snapshotter is the snapshotter CRI unpacks images for.
func (m *Managed) Snapshotter() string { return m.snapshotter }

// StartedByUs is false for an adopted containerd.
func (m *Managed) StartedByUs() bool { return m.startedByUs }

// Pid is containerd's process ID, or 0 if it is unknown (adopted without a
// usable pid file).
func (m *Managed) Pid() int { return m.pid }

// LogPath is the file containerd's output goes to.
func (m *Managed) LogPath() string { return m.layout.Log }

// StateDir is where the containerd keeps its tasks' state, the containers'
// root filesystems among them.
func (m *Managed) StateDir() string { return m.layout.State }

// Done is closed when a containerd started by us exits, for whatever
// reason. For an adopted containerd it is never closed: berth is not its
// parent and cannot wait for it (Supervise watches it by its pid).
func (m *Managed) Done() <-chan struct{} { return m.exited }

// Stop stops the managed containerd, launched or adopted: SIGTERM, then
// SIGKILL when ctx ends first. Containers keep running (their shims are
// not containerd's children). Only an adopted containerd whose process
// berth could not find (pid 0: the socket answered, nobody in /proc ran
// its config) is left alone, for berth cannot tell who it is.
func (m *Managed) Stop(ctx context.Context) error {
	switch {
	case m.startedByUs:
		m.stopOnce.Do(func() {
			forgotten := m.forgottenShims(ctx)
			m.stopErr = errors.Join(m.stop(ctx), m.removeFiles())
			m.killForgotten(forgotten)
		})
	case m.ident.PID > 0:
		m.stopOnce.Do(func() {
			forgotten := m.forgottenShims(ctx)
			m.stopErr = errors.Join(m.stopAdopted(ctx), m.removeFiles())
			m.killForgotten(forgotten)
		})
	}
	return m.stopErr
}

// forgottenShims lists, as containerd is about to stop, the shims it no
// longer knows: berth's calls are over, so none is a sandbox in creation,
// and each would outlive containerd for good. They are killed once it has
// stopped, when it can no longer start cleaning up after them.
func (m *Managed) forgottenShims(ctx context.Context) []shimProcess {
	shims, err := findOrphanShims(ctx, m.layout.Socket)
	if err != nil {
		m.log.Warn("looking for shims containerd forgot", "err", err)
	}
	return shims
}

func (m *Managed) killForgotten(shims []shimProcess) {
	killShims(shims)
	for _, s := range shims {
		m.log.Warn("killed a shim containerd no longer knows, and what it ran", "pid", s.pid, "id", s.id, "namespace", s.namespace)
	}
}

func (m *Managed) stop(ctx context.Context) error {
	var err error
	select {
	case <-m.exited:
		m.log.Warn("containerd had already exited", "pid", m.pid, "status", m.waitErr)
	default:
		if sigErr := m.cmd.Process.Signal(syscall.SIGTERM); sigErr != nil && !errors.Is(sigErr, os.ErrProcessDone) {
			m.log.Warn("signal containerd", "pid", m.pid, "err", sigErr)
		}
		select {
		case <-m.exited:
			m.log.Info("containerd stopped", "pid", m.pid)
		case <-ctx.Done():
			err = fmt.Errorf("containerd (pid %d) did not exit after SIGTERM, killed it: %w", m.pid, ctx.Err())
			if killErr := m.kill(); killErr != nil {
				err = errors.Join(err, killErr)
			}
		}
	}
	return err
}

// removeFiles removes what names a running containerd: its pid file,
// record and sockets.
func (m *Managed) removeFiles() error {
	var err error
	for _, p := range []string{m.layout.PIDFile, filepath.Join(m.layout.Dir, RecordName), m.layout.Socket, m.layout.TTRPCSocket} {
		if rmErr := os.Remove(p); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
	}
	return err
}

// kill SIGKILLs containerd and waits for its reaper.
func (m *Managed) kill() error {
	if err := m.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill containerd (pid %d): %w", m.pid, err)
	}
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-m.exited:
		return nil
	case <-t.C:
		return fmt.Errorf("containerd (pid %d) still not reaped %v after SIGKILL", m.pid, killWait)
	}
}

// launch writes the config and starts a new containerd.
func launch(ctx context.Context, o Options, l layout) (*Managed, error) {
	facts, err := detectFacts(l.Dir)
	var overlayErr *overlayUnsupportedError
	switch {
	case errors.As(err, &overlayErr):
		o.Log.Warn("containerd: falling back to the native snapshotter", "reason", overlayErr.err)
	case err != nil:
		return nil, fmt.Errorf("containerd: %w", err)
	}
	bin, err := detectBinary(ctx, o.Binary)
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	for _, dir := range []string{l.CertsDir, o.CNIConfDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("containerd: %w", err)
		}
	}
	config := renderConfig(configParams{
		Layout: l, SandboxImage: o.SandboxImage, CNIBinDir: o.CNIBinDir, CNIConfDir: o.CNIConfDir, Facts: facts,
		ConfigVersion: bin.ConfigVersion, RuncBinary: bin.Runc, MetricsAddress: o.MetricsAddress,
	})
	if err := atomicfile.Write(l.Config, []byte(config), 0o644); err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	cmd, err := spawn(ctx, o, l)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	m := &Managed{
		layout: l, snapshotter: facts.Snapshotter, pid: cmd.Process.Pid, startedByUs: true, log: o.Log, opts: o,
		cmd: cmd, exited: make(chan struct{}),
	}
	go func() {
		m.waitErr = cmd.Wait()
		close(m.exited)
	}()

	fail := func(err error) (*Managed, error) {
		select {
		case <-m.exited:
		default:
			if killErr := m.kill(); killErr != nil {
				err = errors.Join(err, killErr)
			}
		}
		_ = os.Remove(l.PIDFile)
		_ = os.Remove(filepath.Join(l.Dir, RecordName))
		return nil, fmt.Errorf("containerd: %w\n--- tail of %s:\n%s", err, l.Log, logTail(l.Log))
	}
	if err := atomicfile.Write(l.PIDFile, []byte(strconv.Itoa(m.pid)+"\n"), 0o644); err != nil {
		return fail(err)
	}
	if m.ident, err = writeRecord(l, m.pid); err != nil {
		return fail(err)
	}
	stillRunning := func() bool {
		select {
		case <-m.exited:
			return false
		default:
			return true
		}
	}
	if err := waitReady(ctx, clock.RealClock{}, o.StartTimeout, l.Socket, stillRunning, !o.NetworkLater); err != nil {
		if errors.Is(err, errExited) {
			err = fmt.Errorf("%w: %v", err, m.waitErr)
		}
		return fail(err)
	}
	o.Log.Info("containerd started", "pid", m.pid, "readyAfter", time.Since(started), "address", l.Socket, "snapshotter", facts.Snapshotter,
		"restrictOOMScoreAdj", facts.RestrictOOMScoreAdj, "log", l.Log)
	return m, nil
}

// spawn starts containerd on l's config, in its own session, its output
// appended to its log.
func spawn(ctx context.Context, o Options, l layout) (*exec.Cmd, error) {
	// A socket left by a containerd that died would fool the readiness
	// probe's dial; containerd would replace it anyway.
	for _, p := range []string{l.Socket, l.TTRPCSocket} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("containerd: remove stale socket: %w", err)
		}
	}
	// A berth told to stop while it was starting must not leave a
	// containerd behind: none is started once ctx has ended.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("containerd: not started: %w", err)
	}
	logFile, err := os.OpenFile(l.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	fmt.Fprintf(logFile, "--- berth starts containerd at %s\n", time.Now().UTC().Format(time.RFC3339))
	// No CommandContext and no Pdeathsig: containerd must outlive berth.
	cmd := exec.Command(o.Binary, "--config", l.Config)
	cmd.Dir = l.Dir
	cmd.Env = pathFirst(os.Environ(), filepath.Dir(o.Binary))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("containerd: start %s: %w", o.Binary, err)
	}
	return cmd, nil
}

// pathFirst returns env with dir first in its PATH: containerd finds its
// shim (containerd-shim-runc-v2) in PATH, and the shim its runc, so a
// containerd installed in a directory of its own runs its own shim and runc
// without the operator changing PATH.
func pathFirst(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	path := dir
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			if v != "" {
				path = dir + string(os.PathListSeparator) + v
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PATH="+path)
}

var errExited = errors.New("containerd exited")

// waitReady polls the socket until containerd's CRI says it is ready to
// run pods (probeCRI), running() turns false (errExited), or the timeout
// or ctx ends: then the error has the last reason it was not ready.
func waitReady(ctx context.Context, clk clock.WithTicker, timeout time.Duration, socket string, running func() bool, network bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if !running() {
			return errExited
		}
		err := probeCRI(ctx, socket, network)
		if err == nil {
			return nil
		}
		wait := criReadyPollInterval
		if errors.Is(err, errNotListening) {
			wait = readyPollInterval
		}
		t := clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("containerd on %s not ready within %v: %w (last: %v)", socket, timeout, ctx.Err(), err)
		case <-t.C():
		}
	}
}

// probe checks that containerd answers on socket. The dial comes first:
// gRPC would otherwise back off for a second after a missing socket.
func probe(ctx context.Context, socket string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return err
	}
	conn.Close()
	c, err := newClient(socket)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Version(ctx)
	return err
}

func newClient(address string) (*client.Client, error) {
	c, err := client.New(address, client.WithDefaultNamespace(criNamespace))
	if err != nil {
		return nil, fmt.Errorf("containerd client for %s: %w", address, err)
	}
	return c, nil
}
