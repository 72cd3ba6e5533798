package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-dev/berth/internal/buildcache"
)

func TestAddonKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module x\n")
	write("go.sum", "")
	write("main.go", "package main\n")
	mod, err := buildcache.ModuleHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := addonKey(dir, false); err != nil || got != mod {
		t.Errorf("addonKey without sources = %q, %v; want the module's hash %q", got, err, mod)
	}
	before, err := addonKey(dir, true)
	if err != nil || before == mod {
		t.Fatalf("addonKey with sources = %q, %v; want other than %q", before, err, mod)
	}
	write("main.go", "package main\n\nfunc main() {}\n")
	if after, err := addonKey(dir, true); err != nil || after == before {
		t.Errorf("addonKey after main.go changed = %q, %v; want other than %q", after, err, before)
	}
}

// The addons older than the CSI ones keep their cache keys: only their
// modules' go.mod and go.sum name them.
func TestAddonKeysOfOlderAddons(t *testing.T) {
	for _, ad := range addonList() {
		switch ad.name {
		case "kube-proxy", "coredns", "metrics-server", "dra-test-driver", "csi-provisioner", "kubelet":
			if ad.ownSources {
				t.Errorf("%s: its .go files would change its cache key", ad.name)
			}
		case "csi-mock-driver":
			if !ad.ownSources {
				t.Errorf("%s: its main.go is not in its cache key", ad.name)
			}
		default:
			t.Errorf("addon %s: not checked here", ad.name)
		}
	}
}

func TestCSIMockDriverOptions(t *testing.T) {
	ok := CSIMockDriverOptions{DriverName: "d.example", PluginsDir: "/p", RegistryDir: "/r"}
	if err := ok.validate(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
	noReg := ok
	noReg.RegistryDir = ""
	if err := noReg.validate(); err != nil {
		t.Errorf("no registry: %v", err)
	}
	for _, bad := range []CSIMockDriverOptions{
		{DriverName: "", PluginsDir: "/p"},
		{DriverName: "a/b", PluginsDir: "/p"},
		{DriverName: "..", PluginsDir: "/p"},
		{DriverName: "d", PluginsDir: "p"},
		{DriverName: "d", PluginsDir: "/p", RegistryDir: "r"},
	} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
