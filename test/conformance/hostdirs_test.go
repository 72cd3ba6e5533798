package conformance

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// remove takes what the DRA drivers added since the snapshot, keeps what
// was there and what others added, and removes the dirs it saw appear
// once they are empty.
func TestHostDirsRemove(t *testing.T) {
	root := t.TempDir()
	kubelet := filepath.Join(root, "kubelet")
	plugins := filepath.Join(kubelet, "plugins")
	registry := filepath.Join(kubelet, "plugins_registry")
	cdi := filepath.Join(root, "cdi")
	dirs := []string{kubelet, plugins, registry, cdi}
	mkdir := func(p string) {
		t.Helper()
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) {
		t.Helper()
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Before: plugins holds another driver's dir and an old DRA one;
	// plugins_registry and cdi do not exist.
	mkdir(filepath.Join(plugins, "csi.example.com"))
	mkdir(filepath.Join(plugins, "dra-1.k8s.io"))
	h, err := snapshotHostDirs(dirs)
	if err != nil {
		t.Fatal(err)
	}
	mkdir(filepath.Join(plugins, "dra-1706.k8s.io"))
	write(filepath.Join(plugins, "dra-1706.k8s.io", "dra.sock"))
	mkdir(registry)
	write(filepath.Join(registry, "dra-1706.k8s.io-reg.sock"))
	mkdir(cdi)
	write(filepath.Join(cdi, "dra-1706.k8s.io-uid-my-request.json"))
	write(filepath.Join(cdi, "vendor.com-gpu.json")) // someone else's
	if err := h.remove(dirs); err != nil {
		t.Fatal(err)
	}
	var left []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != root {
			left = append(left, strings.TrimPrefix(p, root+"/"))
		}
		return nil
	})
	sort.Strings(left)
	want := "cdi cdi/vendor.com-gpu.json kubelet kubelet/plugins kubelet/plugins/csi.example.com kubelet/plugins/dra-1.k8s.io"
	if got := strings.Join(left, " "); got != want {
		t.Errorf("left %s, want %s", got, want)
	}
	// A dir the run made goes once nothing is left in it.
	if err := os.Remove(filepath.Join(cdi, "vendor.com-gpu.json")); err != nil {
		t.Fatal(err)
	}
	if err := h.remove(dirs); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cdi); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cdi, made during the run, is still there: %v", err)
	}
}

// A dir that was absent and that the run made is removed with its parent.
func TestHostDirsRemoveMade(t *testing.T) {
	root := t.TempDir()
	kubelet := filepath.Join(root, "kubelet")
	plugins := filepath.Join(kubelet, "plugins")
	dirs := []string{kubelet, plugins}
	h, err := snapshotHostDirs(dirs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(plugins, "dra-5.k8s.io"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.remove(dirs); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(kubelet); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("kubelet dir left: %v", err)
	}
}
