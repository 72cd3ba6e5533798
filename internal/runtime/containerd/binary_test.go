package containerd

import (
	"slices"
	"strings"
	"testing"
)

func TestParseConfigVersion(t *testing.T) {
	tests := []struct {
		name, config string
		want         int
		wantErr      string
	}{
		{name: "containerd 1.6", config: "disabled_plugins = []\nimports = []\noom_score = 0\nversion = 2\n\n[cgroup]\n  path = \"\"\n", want: 2},
		{name: "containerd 2.4", config: "version = 4\nroot = '/var/lib/containerd'\n[plugins]\n", want: 4},
		{name: "version only inside a table", config: "root = '/r'\n[plugins.x]\nversion = 3\n", wantErr: "no top-level version"},
		{name: "not a number", config: "version = 'three'\n", wantErr: "not a positive number"},
		{name: "empty", config: "", wantErr: "no top-level version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfigVersion(tt.config)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestPathFirst(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{name: "prepended", env: []string{"HOME=/root", "PATH=/usr/bin:/bin"}, want: []string{"HOME=/root", "PATH=/opt/c2:/usr/bin:/bin"}},
		{name: "no PATH", env: []string{"HOME=/root"}, want: []string{"HOME=/root", "PATH=/opt/c2"}},
		{name: "empty PATH", env: []string{"PATH="}, want: []string{"PATH=/opt/c2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pathFirst(tt.env, "/opt/c2"); !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRenderConfigContainerd2 checks the layout containerd 2 reads without
// migrating its keys: the CRI split into images and runtime plugins, the
// sandbox image pinned, CNI bin_dirs a list, and the runc beside the binary.
func TestRenderConfigContainerd2(t *testing.T) {
	p := testParams("/r", hostFacts{Snapshotter: SnapshotterOverlay})
	p.ConfigVersion, p.RuncBinary = 4, "/opt/c2/runc"
	got := renderConfig(p)
	for _, want := range []string{
		"\nversion = 4\n",
		`disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]`,
		"[plugins.\"io.containerd.server.v1.grpc\"]\n  address = \"/r/containerd/containerd.sock\"\n",
		"[plugins.\"io.containerd.server.v1.ttrpc\"]\n  address = \"/r/containerd/containerd.sock.ttrpc\"\n",
		"[plugins.\"io.containerd.cri.v1.images\"]\n  snapshotter = \"overlayfs\"\n",
		"[plugins.\"io.containerd.cri.v1.images\".pinned_images]\n  sandbox = \"berth.local/pause:1.0\"\n",
		"[plugins.\"io.containerd.cri.v1.images\".registry]\n  config_path = \"/r/containerd/certs.d\"\n",
		"[plugins.\"io.containerd.cri.v1.runtime\"]\n  restrict_oom_score_adj = false\n",
		"[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options]\n  Root = \"/r/containerd/runc\"\n  SystemdCgroup = false\n  BinaryName = \"/opt/c2/runc\"\n",
		"[plugins.\"io.containerd.cri.v1.runtime\".cni]\n  bin_dirs = [\"/usr/lib/cni\"]\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	for _, stale := range []string{"io.containerd.grpc.v1.cri", "sandbox_image", "bin_dir =", "aufs", "[grpc]", "[ttrpc]"} {
		if strings.Contains(got, stale) {
			t.Errorf("config has containerd 1's %q:\n%s", stale, got)
		}
	}
}

func TestSnapshotterFromMountpoint(t *testing.T) {
	tests := []struct {
		mountpoint string
		want       string
		ok         bool
	}{
		{"/var/lib/berth/containerd/root/io.containerd.snapshotter.v1.overlayfs", "overlayfs", true},
		{"/r/containerd/root/io.containerd.snapshotter.v1.native", "native", true},
		{"/r/containerd/root/io.containerd.snapshotter.v1.", "", false},
		{"/var/lib/containerd", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if got, ok := snapshotterFromMountpoint(tt.mountpoint); got != tt.want || ok != tt.ok {
			t.Errorf("snapshotterFromMountpoint(%q) = %q, %t; want %q, %t", tt.mountpoint, got, ok, tt.want, tt.ok)
		}
	}
}

// TestRenderConfigContainerd20 checks containerd 2.0 and 2.1's version 3:
// the same CRI layout, the listeners still in [grpc] and [ttrpc].
func TestRenderConfigContainerd20(t *testing.T) {
	p := testParams("/r", hostFacts{Snapshotter: SnapshotterNative})
	p.ConfigVersion = 3
	got := renderConfig(p)
	for _, want := range []string{
		"\nversion = 3\n",
		"[grpc]\n  address = \"/r/containerd/containerd.sock\"\n",
		"[ttrpc]\n  address = \"/r/containerd/containerd.sock.ttrpc\"\n",
		"[plugins.\"io.containerd.cri.v1.images\"]\n  snapshotter = \"native\"\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "io.containerd.server.v1") || strings.Contains(got, "BinaryName") {
		t.Errorf("config has version 4's server plugins or a runc it was not given:\n%s", got)
	}
}
