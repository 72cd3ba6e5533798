package adminapi

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// shortDir is a temporary directory with a path short enough for sockets.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "adminapi-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestListenMode(t *testing.T) {
	path := SocketPath(shortDir(t))
	old := syscall.Umask(0) // the widest umask must not widen the socket
	ln, err := Listen(context.Background(), path)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	st, err := os.Lstat(path)
	if err != nil || st.Mode().Type() != fs.ModeSocket || st.Mode().Perm() != socketMode {
		t.Errorf("socket %v, %v; want a socket with mode %v", st.Mode(), err, os.FileMode(socketMode))
	}
	if got := ln.Addr().String(); got != path {
		t.Errorf("Addr = %s, want %s", got, path)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary names left behind: %v", entries)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := SocketPath(shortDir(t))
	// A socket nobody serves, as kill -9 leaves it.
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	ln, err := Listen(context.Background(), path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln.Close()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Close left the socket: %v", err)
	}
	if err := ln.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestListenRefuses(t *testing.T) {
	dir := shortDir(t)
	live := filepath.Join(dir, "live.sock")
	other, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{live: "another berth", file: "not a socket"} {
		if ln, err := Listen(context.Background(), path); err == nil || !strings.Contains(err.Error(), want) {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("Listen(%s) = %v; want an error with %q", path, err, want)
		}
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "mine" {
		t.Errorf("the file was touched: %q, %v", data, err)
	}
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("the live socket was touched: %v", err)
	}
}

func TestCloseKeepsANewerSocket(t *testing.T) {
	path := SocketPath(shortDir(t))
	ln, err := Listen(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	// Another server took the path over (the first one is stale to it).
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	newer, err := Listen(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	ln.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("closing the old listener removed the newer socket: %v", err)
	}
}

func TestServeStopsWithContext(t *testing.T) {
	path := SocketPath(shortDir(t))
	ln, err := Listen(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, http.NotFoundHandler(), slog.New(slog.DiscardHandler)) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket left after shutdown: %v", err)
	}
}
