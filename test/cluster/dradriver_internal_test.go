package cluster

import (
	"slices"
	"strings"
	"testing"
)

func TestDRADriverOptions(t *testing.T) {
	good := DRADriverOptions{NodeName: "n1", RegistryDir: "/r/plugins_registry", PluginsDir: "/r/plugins", CDIDir: "/r/cdi"}
	o := good
	if err := o.validate(); err != nil || o.DriverName != DefaultDRADriverName || o.NumDevices != 0 {
		t.Errorf("validate(%+v) = %v, options %+v; want the default driver name", good, err, o)
	}
	for _, tc := range []struct {
		name   string
		change func(*DRADriverOptions)
		field  string
	}{
		{"no node", func(o *DRADriverOptions) { o.NodeName = "" }, "NodeName"},
		{"node with a slash", func(o *DRADriverOptions) { o.NodeName = "a/b" }, "NodeName"},
		{"driver ..", func(o *DRADriverOptions) { o.DriverName = ".." }, "DriverName"},
		{"relative registry", func(o *DRADriverOptions) { o.RegistryDir = "plugins_registry" }, "RegistryDir"},
		{"no plugins dir", func(o *DRADriverOptions) { o.PluginsDir = "" }, "PluginsDir"},
		{"relative CDI dir", func(o *DRADriverOptions) { o.CDIDir = "cdi" }, "CDIDir"},
		{"negative devices", func(o *DRADriverOptions) { o.NumDevices = -1 }, "NumDevices"},
	} {
		o := good
		tc.change(&o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: validate = %v, want an error naming %s", tc.name, err, tc.field)
		}
	}
}

func TestDRADriverArgs(t *testing.T) {
	o := DRADriverOptions{NodeName: "n1", RegistryDir: "/r/reg", PluginsDir: "/r/plugins", CDIDir: "/r/cdi", DriverName: "d.example.com", NumDevices: 2}
	got := draDriverArgs("/k/kc", o)
	want := []string{"--kubeconfig=/k/kc", "--drivername=d.example.com", "--v=5", "kubelet-plugin", "--node-name=n1",
		"--plugin-registration-path=/r/reg", "--datadir=/r/plugins", "--cdi-dir=/r/cdi", "--num-devices=2"}
	if !slices.Equal(got, want) {
		t.Errorf("draDriverArgs =\n%q\nwant\n%q", got, want)
	}
	o.NumDevices = 0 // the driver's default
	if got := draDriverArgs("/k/kc", o); slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--num-devices") }) {
		t.Errorf("draDriverArgs with NumDevices 0 = %q, want no --num-devices", got)
	}
}

func TestDeviceClassExpression(t *testing.T) {
	if got, want := deviceClassExpression("test-driver.cdi.k8s.io"), `device.driver == "test-driver.cdi.k8s.io"`; got != want {
		t.Errorf("deviceClassExpression = %s, want %s", got, want)
	}
}

func TestWithoutEnv(t *testing.T) {
	got := withoutEnv([]string{"A=1", "KUBECONFIG=/x", "KUBECONFIGX=2", "B="}, "KUBECONFIG")
	if want := []string{"A=1", "KUBECONFIGX=2", "B="}; !slices.Equal(got, want) {
		t.Errorf("withoutEnv = %q, want %q", got, want)
	}
}
