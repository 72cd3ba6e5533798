package cluster

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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
	write("main_test.go", "package main\n")
	if got, err := addonKey(dir, true); err != nil || got != before {
		t.Errorf("addonKey after a test file came = %q, %v; want %q still", got, err, before)
	}
	write("main.go", "package main\n\nfunc main() {}\n")
	after, err := addonKey(dir, true)
	if err != nil || after == before {
		t.Errorf("addonKey after main.go changed = %q, %v; want other than %q", after, err, before)
	}

	// A module it uses (a replace directive's directory) is in the key.
	used := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum", "lib.go"} {
		if err := os.WriteFile(filepath.Join(used, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	with, err := addonKey(dir, true, used)
	if err != nil || with == after {
		t.Fatalf("addonKey using a module = %q, %v; want other than %q", with, err, after)
	}
	if err := os.WriteFile(filepath.Join(used, "lib.go"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := addonKey(dir, true, used); err != nil || got == with {
		t.Errorf("addonKey after the used module's source changed = %q, %v; want other than %q", got, err, with)
	}
}

// An addon's uses are exactly the tools/ modules its go.mod replaces with
// their directories: one left out would leave its cache key unchanged by
// a change that changes its binary.
func TestAddonUsesMatchReplaces(t *testing.T) {
	local := regexp.MustCompile(`=>\s*\.\./([A-Za-z0-9._-]+)\s*$`)
	for _, ad := range addonList() {
		data, err := os.ReadFile(filepath.Join("tools", ad.name, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		var replaced []string
		for _, line := range strings.Split(string(data), "\n") {
			if m := local.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				replaced = append(replaced, m[1])
			}
		}
		if !slices.Equal(replaced, ad.uses) {
			t.Errorf("%s: go.mod replaces %v with directories, its uses are %v", ad.name, replaced, ad.uses)
		}
		if len(ad.uses) > 0 && !ad.ownSources {
			t.Errorf("%s: uses %v, but sources are not in its key", ad.name, ad.uses)
		}
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
		case "csi-mock-driver", "csi-hostpath-driver":
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

func TestCSIHostPathDriverOptions(t *testing.T) {
	ok := CSIHostPathDriverOptions{DriverName: "hp.example", NodeID: "n1", StateDir: "/s", PluginsDir: "/p", RegistryDir: "/r"}
	if err := ok.validate(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
	noReg := ok
	noReg.RegistryDir = ""
	if err := noReg.validate(); err != nil {
		t.Errorf("no registry: %v", err)
	}
	for field, bad := range map[string]func(o *CSIHostPathDriverOptions){
		"DriverName":  func(o *CSIHostPathDriverOptions) { o.DriverName = "" },
		"DriverName ": func(o *CSIHostPathDriverOptions) { o.DriverName = "a/b" },
		"NodeID":      func(o *CSIHostPathDriverOptions) { o.NodeID = "" },
		"StateDir":    func(o *CSIHostPathDriverOptions) { o.StateDir = "s" },
		"StateDir ":   func(o *CSIHostPathDriverOptions) { o.StateDir = "" },
		"PluginsDir":  func(o *CSIHostPathDriverOptions) { o.PluginsDir = "p" },
		"RegistryDir": func(o *CSIHostPathDriverOptions) { o.RegistryDir = "r" },
	} {
		o := ok
		bad(&o)
		err := o.validate()
		if err == nil || !strings.Contains(err.Error(), strings.TrimSpace(field)) {
			t.Errorf("%+v: %v, want an error naming %s", o, err, strings.TrimSpace(field))
		}
	}
}

// BuildAddon builds only an addon it knows; an unknown name fails before
// any build, naming what was asked for.
func TestBuildAddonUnknown(t *testing.T) {
	_, err := BuildAddon(t.Context(), "kubelett", nil)
	if err == nil || !strings.Contains(err.Error(), `"kubelett"`) {
		t.Errorf("BuildAddon(kubelett) = %v, want an error naming it", err)
	}
}
