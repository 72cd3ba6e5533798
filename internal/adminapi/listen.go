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
	"path/filepath"
	"sync"
	"time"
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
	// requestTimeout bounds reading a request and writing its answer; no
	// request of this API streams.
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
	// Bound under a temporary name, given its mode, then renamed into place:
	// the path never has the umask's mode, and a stale socket is replaced in
	// one step.
	tmp, err := tempName(filepath.Dir(path), filepath.Base(path))
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	// Until the rename, closing ln also unlinks tmp.
	if err := os.Chmod(tmp, socketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	ul := ln.(*net.UnixListener)
	// The socket now lives at path, which Close removes; tmp may be
	// someone else's name by then.
	ul.SetUnlinkOnClose(false)
	created, err := os.Lstat(path)
	if err != nil {
		ul.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return &socketListener{UnixListener: ul, path: path, created: created}, nil
}

// tempName returns an unused name in dir to bind a socket to.
func tempName(dir, base string) (string, error) {
	f, err := os.CreateTemp(dir, "."+base+".")
	if err != nil {
		return "", fmt.Errorf("admin socket: choosing a temporary name: %w", err)
	}
	name := f.Name()
	f.Close()
	// bind needs the name free; CreateTemp only proved it unique.
	if err := os.Remove(name); err != nil {
		return "", fmt.Errorf("admin socket: choosing a temporary name: %w", err)
	}
	return name, nil
}

// socketListener removes its socket on Close, once.
type socketListener struct {
	*net.UnixListener
	path    string
	created fs.FileInfo
	once    sync.Once
	err     error
}

// Addr is the socket's path, not the temporary name it was bound to.
func (l *socketListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *socketListener) Close() error {
	l.once.Do(func() {
		l.err = l.UnixListener.Close()
		fi, err := os.Lstat(l.path)
		if err != nil || !os.SameFile(fi, l.created) {
			return // gone, or a newer server's
		}
		if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.err = errors.Join(l.err, fmt.Errorf("removing admin socket: %w", err))
		}
	})
	return l.err
}

// Serve serves h on ln until ctx ends, then shuts down: requests in flight
// get shutdownTimeout to finish. Serve closes ln, which removes a socket
// from Listen.
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
