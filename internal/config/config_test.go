package config

import (
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{
		StaticPodPath:           "/etc/berth/manifests",
		FileCheckFrequency:      20 * time.Second,
		CgroupDriver:            "cgroupfs",
		MaxPods:                 110,
		ReadOnlyPort:            10255,
		Address:                 "::1",
		PodLogsDir:              "/var/log/pods",
		RootDir:                 "/var/lib/berth",
		NodeName:                "node-1",
		PodCIDR:                 "fd00:88::/64",
		CNIBridge:               "berth0",
		PauseBinary:             "/usr/bin/berth-pause",
		RelistPeriod:            time.Second,
		LogLevel:                "warn",
		DevicePluginDir:         "/var/lib/kubelet/device-plugins",
		PodResourcesDir:         "/var/lib/kubelet/pod-resources",
		PluginRegistrationDir:   "/var/lib/kubelet/plugins_registry",
		DevicePluginWait:        time.Minute,
		Resources:               defaultResources(),
		Images:                  defaultImages(),
		Eviction:                defaultEviction(),
		ContainerGC:             defaultContainerGC(),
		ContainerLogs:           defaultContainerLogs(),
		Cluster:                 defaultCluster(),
		UserNamespacesIDsPerPod: 65536,
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []string // substrings; none means valid
	}{
		{name: "valid", modify: func(*Config) {}},
		{name: "managed runtime", modify: func(c *Config) { c.ContainerRuntimeEndpoint = "" }},
		{name: "unix endpoint", modify: func(c *Config) { c.ContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock" }},
		{name: "bare socket path", modify: func(c *Config) { c.ContainerRuntimeEndpoint = "/run/crio/crio.sock" }},
		{name: "API disabled", modify: func(c *Config) { c.ReadOnlyPort = 0 }},
		{name: "highest port", modify: func(c *Config) { c.ReadOnlyPort = 65535 }},
		{name: "port too high", modify: func(c *Config) { c.ReadOnlyPort = 65536 }, want: []string{"readOnlyPort (--read-only-port): 65536 is out of range"}},
		{name: "empty node name", modify: func(c *Config) { c.NodeName = "" }, want: []string{"--node-name: must not be empty"}},
		{name: "empty pause binary", modify: func(c *Config) { c.PauseBinary = "" }, want: []string{"--pause-binary: must not be empty"}},
		{name: "empty root dir", modify: func(c *Config) { c.RootDir = "" }, want: []string{"--root-dir: must not be empty"}},
		{name: "zero file check", modify: func(c *Config) { c.FileCheckFrequency = 0 }, want: []string{"fileCheckFrequency (--file-check-frequency): 0s must be positive"}},
		{name: "zero value config", modify: func(c *Config) { *c = Config{} },
			want: []string{"--root-dir", "staticPodPath", "podLogsDir", "fileCheckFrequency", "--relist-period", "cgroupDriver", "maxPods",
				"address", "podCIDR", "--node-name", "--cni-bridge", "--pause-binary", "--log-level", "cgroupRoot", "podPidsLimit", "--device-plugin-dir", "--pod-resources-dir", "userNamespaces.idsPerPod"}},
		{name: "ids per pod below a unit", modify: func(c *Config) { c.UserNamespacesIDsPerPod = 1000 }, want: []string{"userNamespaces.idsPerPod: 1000 must not be less than 65536"}},
		{name: "ids per pod not a multiple", modify: func(c *Config) { c.UserNamespacesIDsPerPod = 100000 }, want: []string{"userNamespaces.idsPerPod: 100000 must be a multiple of 65536"}},
		{name: "ids per pod beyond uint32", modify: func(c *Config) { c.UserNamespacesIDsPerPod = 65536 << 16 }, want: []string{"userNamespaces.idsPerPod: 4294967296 must not be more than 4294967295"}},
		{name: "two units per pod", modify: func(c *Config) { c.UserNamespacesIDsPerPod = 131072 }},
		{name: "relative device plugin dir", modify: func(c *Config) { c.DevicePluginDir = "plugins" }, want: []string{`--device-plugin-dir: "plugins" must be an absolute path`}},
		{name: "negative device plugin wait", modify: func(c *Config) { c.DevicePluginWait = -time.Second }, want: []string{"--device-plugin-wait: -1s must not be negative"}},
		{name: "no wait for device plugins", modify: func(c *Config) { c.DevicePluginWait = 0 }},
		{name: "image GC off", modify: func(c *Config) { c.Images.GCHighThresholdPercent, c.Images.GCLowThresholdPercent = 100, 100 }},
		{name: "image GC thresholds out of range", modify: func(c *Config) { c.Images.GCHighThresholdPercent, c.Images.GCLowThresholdPercent = 101, -1 },
			want: []string{"imageGCHighThresholdPercent (--image-gc-high-threshold): 101: must be between 0 and 100", "imageGCLowThresholdPercent (--image-gc-low-threshold): -1: must be between 0 and 100"}},
		{name: "image GC low above high", modify: func(c *Config) { c.Images.GCLowThresholdPercent = 90 },
			want: []string{"imageGCLowThresholdPercent (--image-gc-low-threshold): 90: must not be above imageGCHighThresholdPercent (--image-gc-high-threshold) 85"}},
		{name: "image maximum age below minimum", modify: func(c *Config) { c.Images.MaximumGCAge = time.Minute },
			want: []string{"imageMaximumGCAge: 1m0s: must be greater than imageMinimumGCAge 2m0s"}},
		{name: "negative image minimum age", modify: func(c *Config) { c.Images.MinimumGCAge = -time.Second }, want: []string{"imageMinimumGCAge: -1s: must not be negative"}},
		{name: "parallel pulls while serialized", modify: func(c *Config) { c.Images.MaxParallelPulls = 3 },
			want: []string{"maxParallelImagePulls: 3: must be 1 or unset while serializeImagePulls (--serialize-image-pulls) is true"}},
		{name: "parallel pulls", modify: func(c *Config) { c.Images.SerializePulls, c.Images.MaxParallelPulls = false, 3 }},
		{name: "relative cgroup root", modify: func(c *Config) { c.Resources.CgroupRoot = "kube" }, want: []string{`cgroupRoot (--cgroup-root): "kube": must be an absolute cgroup path`}},
		{name: "enforcing pods without QoS cgroups", modify: func(c *Config) { c.Resources.CgroupsPerQOS = false },
			want: []string{`enforceNodeAllocatable: "pods" needs cgroupsPerQOS (--cgroups-per-qos)`}},
		{name: "no QoS cgroups, nothing enforced", modify: func(c *Config) { c.Resources.CgroupsPerQOS = false; c.Resources.EnforceNodeAllocatable = nil }},
		{name: "system-reserved enforcement", modify: func(c *Config) { c.Resources.EnforceNodeAllocatable = []string{"pods", "system-reserved"} },
			want: []string{`enforceNodeAllocatable: "system-reserved": berth does not enforce reservations on system cgroups yet`}},
		{name: "zero pids limit", modify: func(c *Config) { c.Resources.PodPidsLimit = 0 }, want: []string{"podPidsLimit (--pod-max-pids): 0: must be positive"}},
		{name: "bad eviction threshold", modify: func(c *Config) { c.Eviction.Hard = map[string]string{"memory.available": "lots"} }, want: []string{`evictionHard`, `memory.available`, `"lots"`}},
		{name: "eviction threshold over 100%", modify: func(c *Config) { c.Eviction.Hard = map[string]string{"memory.available": "120%"} }, want: []string{`evictionHard`, `memory.available`, `"120%"`}},
		{name: "unknown eviction signal", modify: func(c *Config) { c.Eviction.Soft = map[string]string{"disk.free": "1Gi"} }, want: []string{`evictionSoft`, `disk.free`}},
		{name: "containerd binary by path", modify: func(c *Config) { c.ContainerdBinary = "/opt/containerd2/containerd" }},
		{name: "relative containerd binary", modify: func(c *Config) { c.ContainerdBinary = "bin/containerd" },
			want: []string{`--containerd-binary: "bin/containerd" must be an absolute path or a name looked up in PATH`}},
		{name: "containerd binary with an external runtime", modify: func(c *Config) {
			c.ContainerdBinary, c.ContainerRuntimeEndpoint = "/opt/containerd2/containerd", "unix:///run/containerd/containerd.sock"
		}, want: []string{`--containerd-binary: "/opt/containerd2/containerd" is for berth's managed containerd`}},
		{name: "negative container GC age", modify: func(c *Config) { c.ContainerGC.MinAge = -time.Second }, want: []string{`--minimum-container-ttl-duration: -1s: must not be negative`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.modify(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
