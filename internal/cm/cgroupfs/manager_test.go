package cgroupfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/cm"
)

func TestNewDetection(t *testing.T) {
	t.Run("cgroup.controllers means v2", func(t *testing.T) {
		root := fakeCgroup2(t, "cpu memory pids")
		m, err := New(root)
		if err != nil || m.Version() != 2 {
			t.Fatalf("New = %v, %v; want v2", m, err)
		}
	})
	t.Run("neither", func(t *testing.T) {
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "notes"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := New(root)
		if err == nil || !strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), "notes (filesystem magic") {
			t.Errorf("New = %v; want an error naming %s and what it holds", err, root)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := New(filepath.Join(t.TempDir(), "nope")); err == nil {
			t.Error("New of a missing directory succeeded")
		}
	})
}

// TestNewV1Layout: directory names list their controllers, and the alias
// symlinks some hosts add are not hierarchies of their own.
func TestNewV1Layout(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"cpu,cpuacct", "memory", "systemd"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("cpu,cpuacct", filepath.Join(root, "cpu")); err != nil {
		t.Fatal(err)
	}
	m, err := NewV1(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(root, "cpu,cpuacct"), filepath.Join(root, "memory"), filepath.Join(root, "systemd")}
	if !slices.Equal(m.hierarchies, want) {
		t.Errorf("hierarchies = %v, want %v", m.hierarchies, want)
	}
	for c, h := range map[string]string{"cpu": "cpu,cpuacct", "cpuacct": "cpu,cpuacct", "memory": "memory", "pids": ""} {
		if h != "" {
			h = filepath.Join(root, h)
		}
		if m.controllers[c] != h {
			t.Errorf("controller %s in %q, want %q", c, m.controllers[c], h)
		}
	}
	if err := m.Update("/x", cm.ResourceConfig{PidsLimit: i64(5)}); err == nil || !strings.Contains(err.Error(), "PidsLimit needs the pids controller") {
		t.Errorf("Update of pids without a pids hierarchy = %v", err)
	}

	if _, err := NewV1(t.TempDir()); err == nil || !strings.Contains(err.Error(), "cpu controller") {
		t.Errorf("NewV1 without a cpu hierarchy = %v; want an error saying so", err)
	}
}

func TestPathsAreChecked(t *testing.T) {
	m, err := NewV2(fakeCgroup2(t, "cpu memory pids"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"kubepods", "/kubepods/", "/a/../b", "//a", "", "/"} {
		if err := m.Create(p, cm.ResourceConfig{}); err == nil {
			t.Errorf("Create(%q) succeeded", p)
		}
		if err := m.Destroy(p); err == nil {
			t.Errorf("Destroy(%q) succeeded", p)
		}
	}
	if _, err := m.Children("/"); err != nil {
		t.Errorf("Children(/) = %v", err)
	}
	for _, tc := range []struct {
		cfg  cm.ResourceConfig
		want string
	}{
		{cm.ResourceConfig{Memory: i64(-2)}, "Memory -2: must be -1 (unlimited) or at least 0"},
		{cm.ResourceConfig{CPUQuota: i64(0)}, "CPUQuota 0: must be -1 (unlimited) or at least 1"},
		{cm.ResourceConfig{PidsLimit: i64(-5)}, "PidsLimit -5"},
		{cm.ResourceConfig{CPUPeriod: u64(0)}, "CPUPeriod 0"},
	} {
		if err := m.Update("/x", tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Update(%s) = %v; want %q", show(tc.cfg), err, tc.want)
		}
	}
}

func TestLevels(t *testing.T) {
	for p, want := range map[string][]string{
		"/a":     {"/a"},
		"/a/b/c": {"/a", "/a/b", "/a/b/c"},
	} {
		if got := levels(p); !slices.Equal(got, want) {
			t.Errorf("levels(%s) = %v, want %v", p, got, want)
		}
	}
}
