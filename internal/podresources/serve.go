package podresources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/unixsocket"
)

// DefaultSocketPath is where the kubelet serves this API, and so where
// monitoring agents look for it.
const DefaultSocketPath = "/var/lib/kubelet/pod-resources/" + SocketName

// SocketName is the socket's name in its directory.
const SocketName = "kubelet.sock"

const (
	// socketDirMode keeps the directory the owner's (root's) alone; the
	// kubelet's 0750 would let its group list it.
	socketDirMode = 0o700
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
	ln, err := listen(ctx, socketPath)
	if err != nil {
		return err
	}
	defer func() {
		// gRPC has closed it by now; closing again reports what removing
		// the socket did.
		if closeErr := ln.Close(); closeErr != nil && !errors.Is(closeErr, net.ErrClosed) {
			err = errors.Join(err, closeErr)
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

// listen binds the socket at socketPath, creating its directory if
// needed; closing the listener (gRPC's Stop does) removes the socket.
func listen(ctx context.Context, socketPath string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(socketPath), socketDirMode); err != nil {
		return nil, fmt.Errorf("creating pod resources socket directory: %w", err)
	}
	ln, err := unixsocket.Listen(ctx, socketPath, socketMode)
	if err != nil {
		return nil, fmt.Errorf("pod resources socket: %w", err)
	}
	return ln, nil
}
