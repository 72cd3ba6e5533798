package podresources

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/clock"
)

// DefaultSocketPath is where the kubelet serves this API, and so where
// monitoring agents look for it.
const DefaultSocketPath = "/var/lib/kubelet/pod-resources/" + SocketName

// SocketName is the socket's name in its directory.
const SocketName = "kubelet.sock"

const (
	// socketDirMode is the kubelet's mode for the socket's directory.
	socketDirMode = 0o750
	// socketMode: the kubelet leaves the socket at the umask's mode (0755
	// under the usual 022, which lets only the owner connect, since connect
	// needs write permission). berth sets owner-only explicitly, so a lax
	// umask cannot open the API to every local user.
	socketMode = 0o600
	// shutdownTimeout bounds how long Serve waits for calls in flight once
	// its context ends; calls still running then are cut off.
	shutdownTimeout = 5 * time.Second
)

// Serve listens on socketPath and serves srv, rate-limited as the kubelet
// does, until ctx ends; then it stops gracefully, waiting at most
// shutdownTimeout for calls in flight, and removes the socket. The socket's
// directory is created if missing; a socket left at socketPath by an earlier
// run is replaced, anything else there is an error. A failure to listen
// returns at once.
func Serve(ctx context.Context, socketPath string, srv podresourcesapi.PodResourcesListerServer, log *slog.Logger) (err error) {
	ln, created, err := listen(ctx, socketPath)
	if err != nil {
		return err
	}
	defer func() {
		if rmErr := removeSocket(socketPath, created); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
	}()

	limiter := rate.NewLimiter(defaultQPS, defaultBurstTokens)
	gs := grpc.NewServer(grpc.UnaryInterceptor(rateLimit(limiter, clock.RealClock{})))
	podresourcesapi.RegisterPodResourcesListerServer(gs, srv)
	log.Info("pod resources API listening", "socket", socketPath)

	served := make(chan error, 1)
	go func() { served <- gs.Serve(ln) }()

	select {
	case err := <-served:
		// gRPC's Serve returns on its own only when accepting fails; close
		// the connections it leaves open.
		gs.Stop()
		return fmt.Errorf("serving pod resources API on %s: %w", socketPath, err)
	case <-ctx.Done():
	}

	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(shutdownTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		log.Warn("pod resources API: calls still running at shutdown, cutting them off", "timeout", shutdownTimeout)
		// Stop also ends the GracefulStop in flight.
		gs.Stop()
		<-stopped
	}
	if err := <-served; err != nil {
		return fmt.Errorf("serving pod resources API on %s: %w", socketPath, err)
	}
	return nil
}

// listen binds a unix socket at socketPath with socketMode and returns it
// with the file it made, so that shutdown removes that socket and no other.
// The socket is bound under a temporary name, given its mode, then renamed
// over socketPath: clients never find the path missing or with the umask's
// mode, and a stale socket from a killed run is replaced in one step.
func listen(ctx context.Context, socketPath string) (net.Listener, fs.FileInfo, error) {
	dir := filepath.Dir(socketPath)
	if err := os.MkdirAll(dir, socketDirMode); err != nil {
		return nil, nil, fmt.Errorf("creating pod resources socket directory: %w", err)
	}
	switch fi, err := os.Lstat(socketPath); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, nil, fmt.Errorf("checking pod resources socket: %w", err)
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, nil, fmt.Errorf("pod resources socket %s: exists and is not a socket (%s)", socketPath, fi.Mode().Type())
	}

	tmp, err := tempName(dir, filepath.Base(socketPath))
	if err != nil {
		return nil, nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", tmp)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on %s: %w", tmp, err)
	}
	// Until the rename, closing ln also unlinks tmp.
	if err := os.Chmod(tmp, socketMode); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("setting mode of pod resources socket: %w", err)
	}
	if err := os.Rename(tmp, socketPath); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("moving pod resources socket into place: %w", err)
	}
	// From now on the socket lives at socketPath, which removeSocket owns:
	// closing must not unlink tmp, a name that may belong to someone else.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	created, err := os.Lstat(socketPath)
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("checking pod resources socket: %w", err)
	}
	return ln, created, nil
}

// tempName returns a fresh unused name in dir for binding the socket.
func tempName(dir, base string) (string, error) {
	f, err := os.CreateTemp(dir, "."+base+".")
	if err != nil {
		return "", fmt.Errorf("choosing a temporary name for the pod resources socket: %w", err)
	}
	name := f.Name()
	f.Close()
	// bind needs the name free; CreateTemp only proved it unique.
	if err := os.Remove(name); err != nil {
		return "", fmt.Errorf("choosing a temporary name for the pod resources socket: %w", err)
	}
	return name, nil
}

// removeSocket removes socketPath if it is still the socket listen made: a
// newer server that took the path over keeps its socket.
func removeSocket(socketPath string, created fs.FileInfo) error {
	fi, err := os.Lstat(socketPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing pod resources socket: %w", err)
	}
	if !os.SameFile(fi, created) {
		return nil
	}
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing pod resources socket: %w", err)
	}
	return nil
}
