package config

import (
	"github.com/spf13/pflag"
)

// Flag names. FlagConfig is exported because the caller reads it to find the
// file it passes to Load.
const (
	FlagConfig                   = "config"
	flagRootDir                  = "root-dir"
	flagNodeName                 = "node-name"
	flagPodCIDR                  = "pod-cidr"
	flagCNIBridge                = "cni-bridge"
	flagCNIConfDir               = "cni-conf-dir"
	flagCNIBinDir                = "cni-bin-dir"
	flagContainerdBinary         = "containerd-binary"
	flagClusterCIDR              = "cluster-cidr"
	flagPodManifestPath          = "pod-manifest-path"
	flagFileCheckFrequency       = "file-check-frequency"
	flagContainerRuntimeEndpoint = "container-runtime-endpoint"
	flagCgroupDriver             = "cgroup-driver"
	flagMaxPods                  = "max-pods"
	flagReadOnlyPort             = "read-only-port"
	flagAddress                  = "address"
	flagPodLogsDir               = "pod-logs-dir"
	flagPauseBinary              = "pause-binary"
	flagRelistPeriod             = "relist-period"
	flagLogLevel                 = "log-level"
	flagLoggingFormat            = "logging-format"
	flagCgroupsPerQOS            = "cgroups-per-qos"
	flagCgroupRoot               = "cgroup-root"
	flagPodMaxPids               = "pod-max-pids"
	flagDevicePluginDir          = "device-plugin-dir"
	flagPodResourcesDir          = "pod-resources-dir"
	flagPluginRegistrationDir    = "plugin-registration-dir"
	flagDevicePluginWait         = "device-plugin-wait"
	flagImageGCHigh              = "image-gc-high-threshold"
	flagImageGCLow               = "image-gc-low-threshold"
	flagSerializeImagePulls      = "serialize-image-pulls"
	flagPinnedImage              = "pinned-image"
	flagImageGCPeriod            = "image-gc-period"
	flagAllowedUnsafeSysctls     = "allowed-unsafe-sysctls"

	flagEvictionHard                     = "eviction-hard"
	flagEvictionSoft                     = "eviction-soft"
	flagEvictionSoftGracePeriod          = "eviction-soft-grace-period"
	flagEvictionMinimumReclaim           = "eviction-minimum-reclaim"
	flagEvictionPressureTransitionPeriod = "eviction-pressure-transition-period"
	flagEvictionMaxPodGracePeriod        = "eviction-max-pod-grace-period"
	flagEvictionMonitoringInterval       = "eviction-monitoring-interval"
	flagMinimumContainerTTL              = "minimum-container-ttl-duration"
	flagMaxPerPodContainer               = "maximum-dead-containers-per-container"
	flagMaxContainers                    = "maximum-dead-containers"
	flagContainerGCPeriod                = "container-gc-period"
	// flagV is the kubelet's verbosity flag, kept as an alias of --log-level
	// so kubelet command lines keep working.
	flagV = "v"
)

// AddFlags registers berth's configuration flags on fs. The names are the
// kubelet's wherever the kubelet has the option. A flag overrides the
// configuration file only when it is given on the command line.
func AddFlags(fs *pflag.FlagSet) {
	fs.String(FlagConfig, "", "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1); flags override its fields")
	fs.String(flagRootDir, DefaultRootDir, "directory for berth's state, the managed containerd and, by default, the manifests")
	fs.String(flagNodeName, "", "name of this node (default: the host name, lower-cased)")
	fs.String(flagPodCIDR, DefaultPodCIDR, "CIDR from which pod IPs are assigned")
	fs.String(flagCNIBridge, DefaultCNIBridge, "Linux bridge of the pod network berth sets up for its managed containerd")
	fs.String(flagCNIConfDir, DefaultCNIConfDir, "host CNI configuration dir: when it holds a configuration (always, when this flag is given) the managed containerd uses it instead of berth's bridge")
	fs.String(flagCNIBinDir, DefaultCNIBinDir, "CNI plugin binaries (the kubelet's default is /opt/cni/bin, where CNI DaemonSets install theirs)")
	fs.String(flagContainerdBinary, DefaultContainerdBinary, "the containerd berth's managed runtime runs (a name in PATH or an absolute path); the containerd-shim-runc-v2 and runc in its directory come first, e.g. the containerd 2 of `make containerd2`")
	fs.String(flagClusterCIDR, "", "CIDR of every node's pods: traffic to it from this node's pods is not masqueraded (default: the bridge plugin's masquerade, which exempts only this node's pod CIDR)")
	fs.String(flagPodManifestPath, "", "directory of static pod manifests (default: <root-dir>/"+ManifestsDirName+")")
	fs.Duration(flagFileCheckFrequency, DefaultFileCheckFrequency, "how often to re-read the manifest directory even without a change notification")
	fs.String(flagContainerRuntimeEndpoint, "", "CRI socket of an existing runtime, e.g. unix:///run/containerd/containerd.sock (default: berth starts its own containerd)")
	fs.String(flagCgroupDriver, DefaultCgroupDriver, "cgroup driver; only cgroupfs is supported")
	fs.Int32(flagMaxPods, DefaultMaxPods, "maximum number of pods on this node")
	fs.Int32(flagReadOnlyPort, DefaultReadOnlyPort, "port of the local read-only API (/healthz, /pods, /stats/summary, /metrics; no logs); 0 disables it")
	fs.String(flagAddress, DefaultAddress, "IP address the APIs listen on; the read-only API, which has no authentication, only on a loopback one")
	fs.String(flagPodLogsDir, DefaultPodLogsDir, "directory of container log files")
	fs.String(flagPauseBinary, "", "sandbox (pause) program (default: "+PauseBinaryName+" next to the berth executable, else in PATH)")
	fs.Duration(flagRelistPeriod, DefaultRelistPeriod, "how often to list the runtime to catch what its events missed")
	fs.String(flagLogLevel, DefaultLogLevel, "log level: debug, info, warn or error")
	fs.String(flagLoggingFormat, "", "log format: text or json (default: text on a terminal, else json)")
	fs.Bool(flagCgroupsPerQOS, true, "put pods in the kubepods / QoS class / pod cgroup hierarchy")
	fs.String(flagCgroupRoot, DefaultCgroupRoot, "cgroup that holds the kubepods cgroup")
	fs.Int64(flagPodMaxPids, -1, "pids.max of every pod cgroup; -1 for no limit")
	fs.String(flagDevicePluginDir, DefaultDevicePluginDir, "directory of the device plugins' registration socket (kubelet.sock), their sockets and the device checkpoint")
	fs.String(flagPodResourcesDir, DefaultPodResourcesDir, "directory of the pod-resources API socket (kubelet.sock)")
	fs.String(flagPluginRegistrationDir, DefaultPluginRegistrationDir, "directory watched for the registration sockets of DRA drivers (cluster mode)")
	fs.Duration(flagDevicePluginWait, DefaultDevicePluginWait, "how long a new pod that needs a device waits for the device plugin to register before it is rejected")
	fs.Int32(flagImageGCHigh, DefaultImageGCHighThresholdPercent, "image filesystem usage (percent) at which image GC starts; 100 turns the periodic GC off")
	fs.Int32(flagImageGCLow, DefaultImageGCLowThresholdPercent, "image filesystem usage (percent) image GC frees down to")
	fs.Bool(flagSerializeImagePulls, true, "pull one image at a time")
	fs.StringSlice(flagPinnedImage, nil, "image that image GC never removes (repeatable), besides the sandbox image and images the runtime pins")
	fs.Duration(flagImageGCPeriod, DefaultImageGCPeriod, "how often the periodic image GC runs")
	fs.String(flagEvictionHard, "", "hard eviction thresholds, e.g. memory.available<100Mi,nodefs.available<10% (default: the kubelet's)")
	fs.String(flagEvictionSoft, "", "soft eviction thresholds, e.g. memory.available<300Mi")
	fs.String(flagEvictionSoftGracePeriod, "", "grace periods of the soft eviction thresholds, e.g. memory.available=1m30s")
	fs.String(flagEvictionMinimumReclaim, "", "minimum amount reclaimed by an eviction, e.g. imagefs.available=2Gi")
	fs.Duration(flagEvictionPressureTransitionPeriod, DefaultEvictionPressureTransitionPeriod, "how long a pressure condition stays after its threshold was last met")
	fs.Int32(flagEvictionMaxPodGracePeriod, 0, "maximum grace period (seconds) of pods evicted for a soft threshold")
	fs.Duration(flagEvictionMonitoringInterval, DefaultEvictionMonitoringInterval, "how often eviction signals are observed")
	fs.Duration(flagMinimumContainerTTL, 0, "minimum age of a dead container before the container GC may remove it")
	fs.Int32(flagMaxPerPodContainer, DefaultMaxPerPodContainer, "dead instances kept per container; negative for no limit")
	fs.Int32(flagMaxContainers, DefaultMaxContainers, "dead containers kept on the node in all; negative for no limit")
	fs.StringSlice(flagAllowedUnsafeSysctls, nil, "comma-separated unsafe sysctls or sysctl patterns (ending in *) pods may set besides the safe ones; each must be namespaced")
	fs.Duration(flagContainerGCPeriod, DefaultContainerGCPeriod, "how often the container GC runs")
	addServingFlags(fs)
	addClusterFlags(fs)
	addDNSFlags(fs)
	fs.String(flagV, "", "alias of --"+flagLogLevel+"; also accepts a kubelet verbosity number (0-3 = info, 4 and up = debug)")
}
