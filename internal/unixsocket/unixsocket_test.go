package unixsocket

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestListenModeAndCleanup(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "api.sock")
	ln, err := Listen(context.Background(), path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket %v, %v; want a socket with mode 0600 whatever the umask", fi, err)
	}
	if ln.Addr().String() != path {
		t.Errorf("Addr = %s, want %s", ln.Addr(), path)
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ln.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket left after Close: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 0 {
		t.Errorf("files left behind: %v", entries)
	}
}

func TestListenReplacesStaleSocketAndRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.sock")
	first, err := Listen(context.Background(), path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	// A second server takes the path over (the first one's process died
	// without closing): the first one's Close must leave it alone.
	second, err := Listen(context.Background(), path, 0o600)
	if err != nil {
		t.Fatalf("replacing a stale socket: %v", err)
	}
	first.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("closing the old listener removed the new socket: %v", err)
	}
	second.Close()

	file := filepath.Join(dir, "not-a-socket")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(context.Background(), file, 0o600); err == nil {
		t.Error("a regular file was replaced by a socket")
	}
	if data, _ := os.ReadFile(file); string(data) != "keep" {
		t.Error("the regular file was touched")
	}
}
