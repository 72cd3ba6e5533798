package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// fakeHost is a machine whose host name is "Node-1.Example" and whose
// executables are exactly those in files.
func fakeHost(exe string, files ...string) host {
	return host{
		hostname:   func() (string, error) { return "Node-1.Example\n", nil },
		executable: func() (string, error) { return exe, nil },
		lookPath: func(file string) (string, error) {
			for _, f := range files {
				if f == file || (!strings.Contains(file, "/") && filepath.Base(f) == file && strings.HasPrefix(f, "/usr/bin/")) {
					return f, nil
				}
			}
			return "", errors.New("executable file not found")
		},
		// The default resolv.conf is taken as readable, whatever this
		// machine has; any other path is tried.
		readable: func(path string) error {
			if path == DefaultResolvConf {
				return nil
			}
			return readableFile(path)
		},
	}
}

var testHost = fakeHost("/opt/berth/berth", "/opt/berth/berth-pause")

// loadWith writes the file (when not empty), parses args and loads.
func loadWith(t *testing.T, file string, args []string, h host) (*Config, error) {
	t.Helper()
	var path string
	if file != "" {
		path = filepath.Join(t.TempDir(), "kubelet.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return load(path, fs, h)
}

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func TestLoadDefaults(t *testing.T) {
	cfg, err := loadWith(t, "", nil, testHost)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		StaticPodPath:         "/var/lib/berth/manifests",
		FileCheckFrequency:    20 * time.Second,
		CgroupDriver:          "cgroupfs",
		MaxPods:               110,
		ReadOnlyPort:          10255,
		Address:               "127.0.0.1",
		PodLogsDir:            "/var/log/pods",
		RootDir:               "/var/lib/berth",
		NodeName:              "node-1.example",
		PodCIDR:               "10.88.0.0/16",
		CNIBridge:             "berth0",
		CNIConfDir:            DefaultCNIConfDir,
		CNIBinDir:             DefaultCNIBinDir,
		ContainerdBinary:      DefaultContainerdBinary,
		PauseBinary:           "/opt/berth/berth-pause",
		RelistPeriod:          time.Second,
		LogLevel:              "info",
		DevicePluginDir:       "/var/lib/kubelet/device-plugins",
		PodResourcesDir:       "/var/lib/kubelet/pod-resources",
		PluginRegistrationDir: "/var/lib/kubelet/plugins_registry",
		DevicePluginWait:      2 * time.Minute,
		Images:                defaultImages(),
		Resources:             defaultResources(),
		Eviction: Eviction{
			Hard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
				"imagefs.available": "15%", "imagefs.inodesFree": "5%"},
			PressureTransitionPeriod: 5 * time.Minute,
			MonitoringInterval:       10 * time.Second,
		},
		ContainerGC:             ContainerGC{MaxPerPodContainer: 1, MaxContainers: -1, Period: time.Minute},
		Memory:                  Memory{FailSwapOn: true},
		ContainerLogs:           defaultContainerLogs(),
		UserNamespacesIDsPerPod: 65536,
		DNS:                     DNS{ResolvConf: "/etc/resolv.conf"},
		Cluster: Cluster{RegisterNode: true, NodeStatusUpdateFrequency: 10 * time.Second,
			NodeStatusReportFrequency: 5 * time.Minute, NodeLeaseDurationSeconds: 40},
		// Standalone: no webhooks, every authenticated caller allowed.
		Serving: Serving{WebhookAuthentication: ptr.To(false), WebhookCacheTTL: 2 * time.Minute,
			AuthorizationMode: "AlwaysAllow", AuthorizedCacheTTL: 5 * time.Minute, UnauthorizedCacheTTL: 30 * time.Second},
	}
	got := *cfg
	got.Kubelet = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, want)
	}
	kc := cfg.Kubelet
	if kc == nil || kc.APIVersion != "kubelet.config.k8s.io/v1beta1" || kc.Kind != "KubeletConfiguration" {
		t.Fatalf("Kubelet = %+v, want a typed KubeletConfiguration", kc)
	}
	if kc.ReadOnlyPort != 10255 || kc.StaticPodPath != want.StaticPodPath || kc.Address != want.Address {
		t.Errorf("Kubelet does not carry the effective values: %+v", kc)
	}
}

func TestLoadFileAndFlags(t *testing.T) {
	file := header + `
staticPodPath: /etc/kubernetes/manifests
fileCheckFrequency: 5s
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
maxPods: 50
readOnlyPort: 0
address: 127.0.0.2
podLogsDir: /srv/pods
podCIDR: 10.1.0.0/24
`
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, c *Config)
	}{
		{
			name: "file only",
			check: func(t *testing.T, c *Config) {
				if c.StaticPodPath != "/etc/kubernetes/manifests" || c.FileCheckFrequency != 5*time.Second ||
					c.ContainerRuntimeEndpoint != "unix:///run/containerd/containerd.sock" || c.MaxPods != 50 ||
					c.ReadOnlyPort != 0 || c.Address != "127.0.0.2" || c.PodLogsDir != "/srv/pods" || c.PodCIDR != "10.1.0.0/24" {
					t.Errorf("file values not applied: %+v", c)
				}
				if len(c.Unimplemented) != 0 {
					t.Errorf("Unimplemented = %v, want none", c.Unimplemented)
				}
			},
		},
		{
			name: "flags override the file",
			args: []string{"--max-pods=60", "--read-only-port=10256", "--pod-manifest-path=/m", "--file-check-frequency=1m",
				"--root-dir=/r", "--node-name=n1", "--pod-cidr=10.2.0.0/16", "--cni-bridge=br1", "--relist-period=2s", "--log-level=debug"},
			check: func(t *testing.T, c *Config) {
				if c.MaxPods != 60 || c.ReadOnlyPort != 10256 || c.StaticPodPath != "/m" || c.FileCheckFrequency != time.Minute ||
					c.RootDir != "/r" || c.NodeName != "n1" || c.CNIBridge != "br1" || c.PodCIDR != "10.2.0.0/16" || c.RelistPeriod != 2*time.Second ||
					c.LogLevel != "debug" {
					t.Errorf("flags not applied: %+v", c)
				}
				if c.Address != "127.0.0.2" {
					t.Errorf("Address = %q: a flag left unset must not override the file", c.Address)
				}
				if c.Kubelet.MaxPods != 60 || c.Kubelet.StaticPodPath != "/m" {
					t.Errorf("Kubelet not updated with flag values: maxPods %d, staticPodPath %q", c.Kubelet.MaxPods, c.Kubelet.StaticPodPath)
				}
			},
		},
		{
			name: "flag given with its default value still overrides",
			args: []string{"--read-only-port=10255", "--address=127.0.0.1"},
			check: func(t *testing.T, c *Config) {
				if c.ReadOnlyPort != 10255 || c.Address != "127.0.0.1" {
					t.Errorf("ReadOnlyPort %d Address %q", c.ReadOnlyPort, c.Address)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadWith(t, file, tt.args, testHost)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg)
		})
	}
}

func TestLoadStaticPodPathFollowsRootDir(t *testing.T) {
	cfg, err := loadWith(t, "", []string{"--root-dir=/srv/berth"}, testHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StaticPodPath != "/srv/berth/manifests" {
		t.Errorf("StaticPodPath = %q", cfg.StaticPodPath)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		file string // without header unless raw is set
		raw  bool
		args []string
		want []string // substrings of the error
	}{
		{name: "negative maxPods", file: "maxPods: -1", want: []string{"maxPods (--max-pods): -1 must be at least 1"}},
		{name: "zero maxPods flag", args: []string{"--max-pods=0"}, want: []string{"maxPods (--max-pods): 0 must be at least 1"}},
		{name: "bad CIDR flag", args: []string{"--pod-cidr=10.88.0.0/33"}, want: []string{"podCIDR (--pod-cidr)", `"10.88.0.0/33" is not a CIDR`}},
		{name: "bad CIDR in file", file: "podCIDR: banana", want: []string{"podCIDR (--pod-cidr)", "banana"}},
		{name: "bad duration in file", file: "fileCheckFrequency: soon", want: []string{"fileCheckFrequency: ", `invalid duration "soon"`}},
		{name: "negative duration in file", file: "fileCheckFrequency: -5s", want: []string{"fileCheckFrequency (--file-check-frequency): -5s must be positive"}},
		{name: "bad duration flag", args: []string{"--file-check-frequency=soon"}, want: []string{"file-check-frequency", "soon"}},
		{name: "zero relist period", args: []string{"--relist-period=0s"}, want: []string{"--relist-period: 0s must be positive"}},
		{name: "wrong type in file", file: "maxPods: many", want: []string{"maxPods"}},
		{name: "systemd driver", file: "cgroupDriver: systemd", want: []string{"cgroupDriver (--cgroup-driver): systemd is not supported yet; use cgroupfs"}},
		{name: "unknown driver", args: []string{"--cgroup-driver=foo"}, want: []string{"cgroupDriver (--cgroup-driver)", `"foo"`}},
		{name: "port out of range", file: "readOnlyPort: 70000", want: []string{"readOnlyPort (--read-only-port): 70000 is out of range"}},
		{name: "negative port flag", args: []string{"--read-only-port=-1"}, want: []string{"readOnlyPort (--read-only-port): -1"}},
		{name: "bad address", args: []string{"--address=localhost"}, want: []string{"address (--address)", `"localhost" is not an IP address`}},
		{name: "relative manifest dir", file: "staticPodPath: manifests", want: []string{"staticPodPath (--pod-manifest-path)", "absolute"}},
		{name: "relative root dir", args: []string{"--root-dir=var/lib"}, want: []string{"--root-dir", "absolute"}},
		{name: "tcp endpoint", file: "containerRuntimeEndpoint: tcp://1.2.3.4:5", want: []string{"containerRuntimeEndpoint (--container-runtime-endpoint)", "only unix sockets"}},
		{name: "relative socket", args: []string{"--container-runtime-endpoint=unix://run/c.sock"}, want: []string{"containerRuntimeEndpoint", "absolute"}},
		{name: "bad node name", args: []string{"--node-name=Not_A_Name"}, want: []string{"--node-name", `"Not_A_Name"`}},
		{name: "bridge name too long", args: []string{"--cni-bridge=averyverylongbridge"}, want: []string{"--cni-bridge", "longer than 15 bytes"}},
		{name: "bridge name with slash", args: []string{"--cni-bridge=a/b"}, want: []string{"--cni-bridge", "must not contain"}},
		{name: "bad log level", args: []string{"--log-level=loud"}, want: []string{"--log-level", `"loud"`}},
		{name: "unknown field", file: "maxPods: 3\nnotAField: 1", want: []string{"kubelet.yaml", `unknown field "notAField"`}},
		{name: "unknown nested field", file: "authentication:\n  bogus: true", want: []string{`unknown field "authentication.bogus"`}},
		{name: "duplicate field", file: "maxPods: 3\nmaxPods: 4", want: []string{"maxPods"}},
		{name: "wrong apiVersion", raw: true, file: "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n",
			want: []string{`apiVersion "kubelet.config.k8s.io/v1"`, "want apiVersion kubelet.config.k8s.io/v1beta1, kind KubeletConfiguration"}},
		{name: "wrong kind", raw: true, file: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: CredentialProviderConfig\n",
			want: []string{`kind "CredentialProviderConfig"`}},
		{name: "missing kind", raw: true, file: "maxPods: 3\n", want: []string{`apiVersion "", kind ""`}},
		{name: "empty file", raw: true, file: "# nothing\n", want: []string{"the file is empty"}},
		{name: "not YAML", raw: true, file: "{{{", want: []string{"kubelet.yaml"}},
		{
			name: "every error at once",
			file: "maxPods: -1\ncgroupDriver: systemd\nreadOnlyPort: 99999",
			args: []string{"--pod-cidr=x"},
			want: []string{"maxPods", "cgroupDriver", "readOnlyPort", "podCIDR"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := tt.file
			if file != "" && !tt.raw {
				file = header + file + "\n"
			}
			_, err := loadWith(t, file, tt.args, testHost)
			if err == nil {
				t.Fatalf("no error, want one containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := load(path, nil, testHost)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want a not-exist error naming %s", err, path)
	}
}

func TestLoadUnimplemented(t *testing.T) {
	file := header + `
staticPodPath: /etc/kubernetes/manifests
maxPods: 20
evictionHard:
  memory.available: 100Mi
cgroupsPerQOS: true
authentication:
  anonymous:
    enabled: false
syncFrequency: 1m
logging: {}
memorySwap: {}
clusterDNS: []
tracing: null
`
	cfg, err := loadWith(t, file, nil, testHost)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"syncFrequency"}
	if !reflect.DeepEqual(cfg.Unimplemented, want) {
		t.Errorf("Unimplemented = %v, want %v", cfg.Unimplemented, want)
	}
	if got := cfg.Kubelet.EvictionHard["memory.available"]; got != "100Mi" {
		t.Errorf("Kubelet.EvictionHard not kept from the file: %q", got)
	}
}

func TestLoadJSONFile(t *testing.T) {
	file := `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":7}`
	cfg, err := loadWith(t, file, nil, testHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxPods != 7 {
		t.Errorf("MaxPods = %d", cfg.MaxPods)
	}
}

func TestLoadLogLevelAlias(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "info"},
		{[]string{"--v=2"}, "info"},
		{[]string{"--v=4"}, "debug"},
		{[]string{"--v=warn"}, "warn"},
		{[]string{"--v=4", "--log-level=error"}, "error"},
	}
	for _, tt := range tests {
		cfg, err := loadWith(t, "", tt.args, testHost)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if cfg.LogLevel != tt.want {
			t.Errorf("%v: LogLevel = %q, want %q", tt.args, cfg.LogLevel, tt.want)
		}
	}
}

func TestResolvePauseBinary(t *testing.T) {
	tests := []struct {
		name       string
		configured string
		host       host
		want       string
		wantErr    string
	}{
		{name: "next to berth", host: fakeHost("/opt/berth/berth", "/opt/berth/berth-pause", "/usr/bin/berth-pause"), want: "/opt/berth/berth-pause"},
		{name: "in PATH", host: fakeHost("/opt/berth/berth", "/usr/bin/berth-pause"), want: "/usr/bin/berth-pause"},
		{name: "nowhere", host: fakeHost("/opt/berth/berth"), wantErr: "--pause-binary: not set and no executable berth-pause found at /opt/berth/berth-pause or in PATH"},
		{name: "configured", configured: "/x/pause", host: fakeHost("/opt/berth/berth", "/x/pause", "/opt/berth/berth-pause"), want: "/x/pause"},
		{name: "configured but missing", configured: "/x/pause", host: fakeHost("/opt/berth/berth", "/opt/berth/berth-pause"), wantErr: "--pause-binary: executable file not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolvePauseBinary(tt.configured, tt.host)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestLoadReportsMissingPauseBinaryOnce(t *testing.T) {
	_, err := loadWith(t, "", nil, fakeHost("/opt/berth/berth"))
	if err == nil {
		t.Fatal("no error")
	}
	if n := strings.Count(err.Error(), "--pause-binary"); n != 1 {
		t.Errorf("--pause-binary reported %d times: %v", n, err)
	}
}

func TestLoadResources(t *testing.T) {
	file := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupRoot: /custom
kubeReserved: {cpu: 500m, memory: 1Gi}
systemReserved: {memory: 512Mi, pid: "1000"}
evictionHard: {memory.available: 5%}
qosReserved: {memory: 100%}
podPidsLimit: 4096
`
	cfg, err := loadWith(t, file, nil, testHost)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Resources
	if r.CgroupRoot != "/custom" || !r.CgroupsPerQOS || !r.EnforcesPods() || r.PodPidsLimit != 4096 || cfg.Eviction.Hard["memory.available"] != "5%" {
		t.Errorf("resources = %+v", r)
	}
	if r.QOSReservedMemoryPercent == nil || *r.QOSReservedMemoryPercent != 100 {
		t.Errorf("qosReserved memory = %v", r.QOSReservedMemoryPercent)
	}
	if q := r.KubeReserved[v1.ResourceMemory]; q.String() != "1Gi" {
		t.Errorf("kubeReserved memory = %s", q.String())
	}
	if q := r.SystemReserved["pid"]; q.Value() != 1000 {
		t.Errorf("systemReserved pid = %s", q.String())
	}
}

func TestLoadResourcesErrors(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{"qosReserved: {memory: 150%}", `qosReserved.memory: "150%": must be between 0% and 100%`},
		{"qosReserved: {memory: half}", `qosReserved.memory: "half": want a percentage`},
		{"qosReserved: {cpu: 50%}", `qosReserved: "cpu": only memory can be reserved`},
		{"kubeReserved: {memory: -1Gi}", `kubeReserved.memory: "-1Gi": must not be negative`},
		{`systemReserved: {gpu: "1"}`, `systemReserved.gpu: unknown resource`},
		{"kubeReserved: {cpu: lots}", `kubeReserved.cpu: "lots"`},
	} {
		file := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + tt.body + "\n"
		_, err := loadWith(t, file, nil, testHost)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tt.body, err, tt.want)
		}
	}
}

func TestLoadImages(t *testing.T) {
	file := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 70
imageGCLowThresholdPercent: 0
imageMinimumGCAge: 30s
imageMaximumGCAge: 24h
serializeImagePulls: false
maxParallelImagePulls: 4
`
	cfg, err := loadWith(t, file, nil, testHost)
	if err != nil {
		t.Fatal(err)
	}
	want := Images{GCHighThresholdPercent: 70, GCLowThresholdPercent: 0, MinimumGCAge: 30 * time.Second,
		MaximumGCAge: 24 * time.Hour, SerializePulls: false, MaxParallelPulls: 4, GCPeriod: 5 * time.Minute}
	if !reflect.DeepEqual(cfg.Images, want) {
		t.Errorf("images = %+v, want %+v", cfg.Images, want)
	}
	if cfg.Images.ParallelPulls() != 4 || defaultImages().ParallelPulls() != 1 {
		t.Errorf("parallel pulls: %d, default %d", cfg.Images.ParallelPulls(), defaultImages().ParallelPulls())
	}
	if len(cfg.Unimplemented) != 0 {
		t.Errorf("unimplemented = %v", cfg.Unimplemented)
	}
	_, err = loadWith(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 50\n", nil, testHost)
	if err == nil || !strings.Contains(err.Error(), "imageGCLowThresholdPercent (--image-gc-low-threshold): 80: must not be above") {
		t.Errorf("low above high from a file: %v", err)
	}
}

func TestLoadPodNetworkFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
		check   func(*Config) bool
	}{
		{nil, "", func(c *Config) bool {
			return c.CNIConfDir == DefaultCNIConfDir && !c.CNIConfDirExplicit && c.CNIBinDir == DefaultCNIBinDir && !c.PodCIDRExplicit
		}},
		{[]string{"--cni-conf-dir", "/x/net.d", "--cni-bin-dir", "/opt/cni/bin", "--pod-cidr", "10.222.1.0/24", "--cluster-cidr", "10.222.0.0/16"}, "", func(c *Config) bool {
			return c.CNIConfDir == "/x/net.d" && c.CNIConfDirExplicit && c.CNIBinDir == "/opt/cni/bin" && c.PodCIDRExplicit && c.ClusterCIDR == "10.222.0.0/16"
		}},
		{[]string{"--cni-conf-dir", "net.d"}, `--cni-conf-dir: "net.d" must be an absolute path`, nil},
		{[]string{"--cni-bin-dir", "bin"}, `--cni-bin-dir: "bin" must be an absolute path`, nil},
		{[]string{"--cluster-cidr", "10.222.0.0"}, `--cluster-cidr: "10.222.0.0" is not a CIDR`, nil},
		{[]string{"--cluster-cidr", "fd00::/48"}, `only IPv4`, nil},
		{[]string{"--pod-cidr", "10.1.0.0/24", "--cluster-cidr", "10.222.0.0/16"}, `does not hold podCIDR "10.1.0.0/24"`, nil},
	} {
		cfg, err := loadWith(t, "", tc.args, testHost)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: got %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !tc.check(cfg) {
			t.Errorf("%v: got %+v, %v", tc.args, cfg, err)
		}
	}
}

func TestLoadUserNamespacesIDsPerPod(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       int64
		wantErr    string
	}{
		{"unset", "", 65536, ""},
		{"two units", "userNamespaces: {idsPerPod: 131072}\n", 131072, ""},
		{"not a multiple", "userNamespaces: {idsPerPod: 70000}\n", 0, "userNamespaces.idsPerPod: 70000 must be a multiple of 65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadWith(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+tc.file, nil, testHost)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "kubelet.yaml") {
					t.Fatalf("err %v, want %q naming the file", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.UserNamespacesIDsPerPod != tc.want || *cfg.Kubelet.UserNamespaces.IDsPerPod != tc.want || len(cfg.Unimplemented) != 0 {
				t.Fatalf("idsPerPod %d (written back %d), unimplemented %v; want %d", cfg.UserNamespacesIDsPerPod, *cfg.Kubelet.UserNamespaces.IDsPerPod, cfg.Unimplemented, tc.want)
			}
		})
	}
}
