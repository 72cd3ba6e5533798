// Package unixsocket binds the unix sockets berth serves (the admin API, the
// pod-resources API) the one safe way: with their mode from the start,
// replacing a stale socket in one step, and removing on close only the
// socket it made.
package unixsocket

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// Listener is a unix socket bound by Listen. Close removes the socket,
// unless another server has taken its path over since.
type Listener struct {
	*net.UnixListener
	path    string
	created fs.FileInfo
	once    sync.Once
	err     error
}

// Listen binds a unix socket at path with mode. The socket is bound under a
// temporary name in the same directory, given its mode, then renamed over
// path: clients never find the path with the umask's mode, and a stale
// socket from a killed run is replaced in one step. Anything at path that
// is not a socket is an error and stays untouched.
func Listen(ctx context.Context, path string, mode fs.FileMode) (*Listener, error) {
	switch fi, err := os.Lstat(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%s exists and is not a socket (%s)", path, fi.Mode().Type())
	}
	tmp, err := tempName(filepath.Dir(path), filepath.Base(path))
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", tmp)
	if err != nil {
		return nil, err
	}
	// Until the rename, closing ln also unlinks tmp.
	if err := os.Chmod(tmp, mode); err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, err
	}
	ul := ln.(*net.UnixListener)
	// The socket now lives at path, which Close removes; tmp may be
	// someone else's name by then.
	ul.SetUnlinkOnClose(false)
	created, err := os.Lstat(path)
	if err != nil {
		ul.Close()
		return nil, err
	}
	return &Listener{UnixListener: ul, path: path, created: created}, nil
}

// tempName returns an unused name in dir to bind a socket to.
func tempName(dir, base string) (string, error) {
	f, err := os.CreateTemp(dir, "."+base+".")
	if err != nil {
		return "", fmt.Errorf("choosing a temporary name: %w", err)
	}
	name := f.Name()
	f.Close()
	// bind needs the name free; CreateTemp only proved it unique.
	if err := os.Remove(name); err != nil {
		return "", fmt.Errorf("choosing a temporary name: %w", err)
	}
	return name, nil
}

// Addr is the socket's path, not the temporary name it was bound to.
func (l *Listener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// Close stops listening and removes the socket if it is still the one
// Listen made. It is safe to call more than once.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.err = l.UnixListener.Close()
		fi, err := os.Lstat(l.path)
		if err != nil || !os.SameFile(fi, l.created) {
			return // gone, or a newer server's
		}
		if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.err = errors.Join(l.err, fmt.Errorf("removing socket %s: %w", l.path, err))
		}
	})
	return l.err
}
