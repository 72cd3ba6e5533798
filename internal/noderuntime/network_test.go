package noderuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/network"
)

func TestInitialPodCIDR(t *testing.T) {
	cluster := config.Cluster{KubeconfigPath: "/k"}
	for _, tc := range []struct {
		name string
		cfg  config.Config
		want string
	}{
		{"standalone default", config.Config{PodCIDR: "10.88.0.0/16"}, "10.88.0.0/16"},
		{"cluster, not given: wait for the Node's", config.Config{PodCIDR: "10.88.0.0/16", Cluster: cluster}, ""},
		{"cluster, given: until the Node has one", config.Config{PodCIDR: "10.222.1.0/24", PodCIDRExplicit: true, Cluster: cluster}, "10.222.1.0/24"},
	} {
		if got := InitialPodCIDR(&tc.cfg); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestHostMode(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{CNIConfDir: dir}
	if HostMode(cfg) {
		t.Error("an empty default dir must leave berth's bridge")
	}
	cfg.CNIConfDirExplicit = true
	if !HostMode(cfg) {
		t.Error("a dir given explicitly is the host's network, even empty")
	}
	cfg.CNIConfDirExplicit = false
	if err := os.WriteFile(filepath.Join(dir, "10-x.conflist"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !HostMode(cfg) {
		t.Error("a default dir holding a configuration is the host's network")
	}
}

// In cluster mode with no podCIDR yet, berth's bridge has no conflist and
// says why the network is not ready; the Node's podCIDR writes it.
func TestPodNetworkWaitsForTheNodesPodCIDR(t *testing.T) {
	root := t.TempDir()
	cfg := &config.Config{RootDir: root, PodCIDR: "10.88.0.0/16", CNIBridge: "bpodnetut0", Cluster: config.Cluster{KubeconfigPath: "/k"}}
	conf := filepath.Join(berthConfDir(cfg), network.ConfListName)
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("of an earlier run"), 0o644); err != nil {
		t.Fatal(err)
	}
	quiet := func(string, ...any) {}
	n := &podNetwork{cfg: cfg, confDir: berthConfDir(cfg), cidr: InitialPodCIDR(cfg),
		record: func(string, string, string) {}, gc: func() *cnigc.Collector { return nil }, logInfo: quiet, logWarn: quiet}
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Fatalf("the earlier run's conflist is still there: %v", err)
	}
	if p := n.Problem(); !strings.Contains(p, "spec.podCIDR") {
		t.Fatalf("Problem() = %q", p)
	}
	if err := n.SetPodCIDR("10.222.7.0/24"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(conf)
	if err != nil || !strings.Contains(string(data), `"10.222.7.0/24"`) || !strings.Contains(string(data), `"bpodnetut0"`) {
		t.Fatalf("conflist %s (%v)", data, err)
	}
	if p := n.Problem(); p != "" {
		t.Fatalf("Problem() = %q once the Node has a podCIDR", p)
	}
	if err := n.SetPodCIDR("not a CIDR"); err == nil {
		t.Fatal("a bad podCIDR was taken")
	}
}
