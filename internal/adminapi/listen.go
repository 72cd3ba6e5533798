package adminapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/berth-dev/berth/internal/unixsocket"
)

const (
	// socketMode lets only the owner (root) connect: connecting needs write
	// permission. It is set explicitly so that no umask can widen it.
	socketMode = 0o600
	// probeTimeout bounds the check whether a socket left at the path is
	// still served.
	probeTimeout = time.Second
	// shutdownTimeout bounds how long Serve waits for requests in flight
	// once its context ends.
	shutdownTimeout = 5 * time.Second
	// requestTimeout bounds reading a request and writing its answer. The
	// exec and attach streams lift it for their own connections.
	requestTimeout = time.Minute
	idleTimeout    = 2 * time.Minute
)

// Listen binds the unix socket at path with mode 0600. A socket left there
// by a berth that is gone is replaced; a socket that still answers belongs
// to a running berth and is an error, as is anything that is not a socket.
// Closing the listener removes the socket, unless another server has taken
// the path over since.
func Listen(ctx context.Context, path string) (net.Listener, error) {
	switch fi, err := os.Lstat(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("admin socket: %w", err)
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("admin socket %s: exists and is not a socket (%s)", path, fi.Mode().Type())
	default:
		d := net.Dialer{Timeout: probeTimeout}
		if conn, err := d.DialContext(ctx, "unix", path); err == nil {
			conn.Close()
			return nil, fmt.Errorf("admin socket %s is served by a running process: is another berth using this root dir?", path)
		}
	}
	ln, err := unixsocket.Listen(ctx, path, socketMode)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return ln, nil
}

// Serve serves h on ln until ctx ends, then shuts down: requests in flight
// get shutdownTimeout to finish, and exec or attach streams end with ctx,
// which their requests' contexts derive from. Serve closes ln, which
// removes a socket from Listen.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	defer ln.Close()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: requestTimeout,
		ReadTimeout:       requestTimeout,
		WriteTimeout:      requestTimeout,
		IdleTimeout:       idleTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("admin API listening", "socket", ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving the admin API: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if err != nil {
		srv.Close() // cut off what is still running
	}
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serving the admin API: %w", serveErr)
	}
	if err != nil {
		return fmt.Errorf("shutting down the admin API: %w", err)
	}
	return nil
}
