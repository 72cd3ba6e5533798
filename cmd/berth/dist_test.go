package main

import (
	"os"
	"reflect"
	"testing"

	"github.com/spf13/pflag"

	"github.com/berth-dev/berth/internal/config"
)

// The config file `make install` installs is valid, sets only fields berth
// implements, and says what the defaults are: loaded, it configures berth
// as no file does, but for the manifest dir it moves to /etc/berth.
func TestDistConfigIsTheDefaults(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	load := func(path string) *config.Config {
		t.Helper()
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		config.AddFlags(fs)
		if err := fs.Parse([]string{"--pause-binary", self, "--node-name", "n"}); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path, fs)
		if err != nil {
			t.Fatalf("load %q: %v", path, err)
		}
		return cfg
	}
	dist, defaults := load("../../dist/config.yaml"), load("")
	if len(dist.Unimplemented) > 0 {
		t.Errorf("dist/config.yaml sets fields berth does not implement: %v", dist.Unimplemented)
	}
	if dist.StaticPodPath != "/etc/berth/manifests" {
		t.Errorf("staticPodPath %q, want /etc/berth/manifests", dist.StaticPodPath)
	}
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"rootDir", dist.RootDir, defaults.RootDir},
		{"podLogsDir", dist.PodLogsDir, defaults.PodLogsDir},
		{"podCIDR", dist.PodCIDR, defaults.PodCIDR},
		{"maxPods", dist.MaxPods, defaults.MaxPods},
		{"address", dist.Address, defaults.Address},
		{"readOnlyPort", dist.ReadOnlyPort, defaults.ReadOnlyPort},
		{"port", dist.Serving, defaults.Serving},
		{"fileCheckFrequency", dist.FileCheckFrequency, defaults.FileCheckFrequency},
		{"cgroupDriver", dist.CgroupDriver, defaults.CgroupDriver},
		{"containerRuntimeEndpoint", dist.ContainerRuntimeEndpoint, defaults.ContainerRuntimeEndpoint},
		{"resources", dist.Resources, defaults.Resources},
		{"eviction", dist.Eviction, defaults.Eviction},
		{"images", dist.Images, defaults.Images},
	} {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("%s: dist/config.yaml gives %+v, the default is %+v", f.name, f.got, f.want)
		}
	}
}
