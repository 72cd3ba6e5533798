package config

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// host is what Load asks of the machine, so that defaults depending on it
// can be tested.
type host struct {
	hostname   func() (string, error)
	executable func() (string, error)
	lookPath   func(file string) (string, error)
	// readable reports why a file cannot be read, or nil.
	readable func(path string) error
}

func osHost() host {
	return host{
		hostname: os.Hostname,
		executable: func() (string, error) {
			exe, err := os.Executable()
			if err != nil {
				return "", err
			}
			// A symlinked berth (say /usr/local/bin/berth) finds berth-pause
			// next to the real binary.
			return filepath.EvalSymlinks(exe)
		},
		lookPath: exec.LookPath,
		readable: readableFile,
	}
}

// Load builds the effective configuration from berth's defaults, the
// KubeletConfiguration file at path ("" for none) and the flags in flags that
// were set on the command line (flags may be nil), then validates it.
func Load(path string, flags *pflag.FlagSet) (*Config, error) {
	return load(path, flags, osHost())
}

func load(path string, flags *pflag.FlagSet, h host) (*Config, error) {
	cfg := &Config{
		FileCheckFrequency:      DefaultFileCheckFrequency,
		CgroupDriver:            DefaultCgroupDriver,
		MaxPods:                 DefaultMaxPods,
		ReadOnlyPort:            DefaultReadOnlyPort,
		Address:                 DefaultAddress,
		PodLogsDir:              DefaultPodLogsDir,
		RootDir:                 DefaultRootDir,
		PodCIDR:                 DefaultPodCIDR,
		CNIBridge:               DefaultCNIBridge,
		CNIConfDir:              DefaultCNIConfDir,
		CNIBinDir:               DefaultCNIBinDir,
		ContainerdBinary:        DefaultContainerdBinary,
		RelistPeriod:            DefaultRelistPeriod,
		LogLevel:                DefaultLogLevel,
		DevicePluginDir:         DefaultDevicePluginDir,
		PodResourcesDir:         DefaultPodResourcesDir,
		PluginRegistrationDir:   DefaultPluginRegistrationDir,
		DevicePluginWait:        DefaultDevicePluginWait,
		Resources:               defaultResources(),
		Images:                  defaultImages(),
		Eviction:                defaultEviction(),
		Memory:                  defaultMemory(),
		ContainerGC:             defaultContainerGC(),
		ContainerLogs:           defaultContainerLogs(),
		Cluster:                 defaultCluster(),
		DNS:                     defaultDNS(),
		UserNamespacesIDsPerPod: DefaultUserNamespacesIDsPerPod,
	}
	portSet := false

	kc := &kubeletconfigv1beta1.KubeletConfiguration{}
	if path != "" {
		kf, err := readFile(path)
		if err != nil {
			return nil, err
		}
		applyFile(cfg, kf)
		applyImagesFile(&cfg.Images, kf.config, kf.set)
		applyEvictionFile(&cfg.Eviction, kf.config, kf.set)
		applyMemoryFile(&cfg.Memory, kf.config)
		applyClusterFile(&cfg.Cluster, kf.config, kf.set)
		applyDNSFile(&cfg.DNS, kf.config, kf.set)
		applyUserNamespacesFile(&cfg.UserNamespacesIDsPerPod, kf.config)
		portSet = kf.set["port"]
		fileErrs := append(applyResourcesFile(&cfg.Resources, kf.config, kf.set),
			applyServingFile(&cfg.Serving, kf.config, kf.set),
			applyContainerLogsFile(&cfg.ContainerLogs, kf.config, kf.set))
		if err := errors.Join(fileErrs...); err != nil {
			return nil, fmt.Errorf("invalid configuration (%s):\n%w", path, err)
		}
		kc = kf.config
		cfg.Unimplemented = unimplemented(kf.set)
	}
	kc.APIVersion = kubeletconfigv1beta1.SchemeGroupVersion.String()
	kc.Kind = kindKubeletConfiguration

	if flags != nil {
		if err := errors.Join(applyFlags(cfg, flags)...); err != nil {
			return nil, err
		}
		portSet = portSet || flags.Changed(flagPort)
	}
	// A node of a cluster serves the API server on the kubelet's port
	// unless told otherwise; standalone, the secure API is opt-in.
	if cfg.Cluster.Enabled() && !portSet {
		cfg.Serving.Port = DefaultClusterPort
	}
	cfg.Serving.defaultDelegation(cfg.Cluster.KubeconfigPath)
	if err := errors.Join(fillHostDefaults(cfg, h), cfg.Validate(), cfg.DNS.checkResolvConf(h)); err != nil {
		if path != "" {
			return nil, fmt.Errorf("invalid configuration (%s and flags):\n%w", path, err)
		}
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}

	writeBack(kc, cfg)
	cfg.Kubelet = kc
	return cfg, nil
}

// honoured reports whether berth implements a KubeletConfiguration field.
func honoured(field string) bool {
	if slices.Contains(containerLogsFields, field) {
		return true
	}
	switch field {
	case "staticPodPath", "fileCheckFrequency", "containerRuntimeEndpoint", "cgroupDriver",
		"maxPods", "readOnlyPort", "address", "podLogsDir", "podCIDR",
		"port", "tlsCertFile", "tlsPrivateKeyFile", "authentication", "logging",
		"cgroupsPerQOS", "cgroupRoot", "enforceNodeAllocatable", "kubeReserved", "systemReserved",
		"evictionHard", "evictionSoft", "evictionSoftGracePeriod", "evictionMinimumReclaim",
		"evictionPressureTransitionPeriod", "evictionMaxPodGracePeriod", "mergeDefaultEvictionSettings",
		"qosReserved", "podPidsLimit",
		"imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "imageMinimumGCAge", "imageMaximumGCAge",
		"serializeImagePulls", "maxParallelImagePulls",
		"registerNode", "registerWithTaints", "providerID", "nodeStatusUpdateFrequency",
		"nodeStatusReportFrequency", "nodeLeaseDurationSeconds", "authorization",
		"allowedUnsafeSysctls", "rotateCertificates", "serverTLSBootstrap",
		"failSwapOn", "memorySwap", "singleProcessOOMKill",
		"clusterDNS", "clusterDomain", "resolvConf", "userNamespaces":
		return true
	}
	return false
}

func unimplemented(set map[string]bool) []string {
	var out []string
	for field := range set {
		if !honoured(field) {
			out = append(out, field)
		}
	}
	slices.Sort(out)
	return out
}

// applyFile copies the honoured fields the file sets. An empty string means
// "the default", as it does for the kubelet; numbers and durations count
// whenever they are written, so that readOnlyPort: 0 disables the API and
// maxPods: 0 is reported rather than silently replaced.
func applyFile(cfg *Config, kf *kubeletFile) {
	kc := kf.config
	str := func(value string, dst *string) {
		if value != "" {
			*dst = value
		}
	}
	str(kc.StaticPodPath, &cfg.StaticPodPath)
	str(kc.ContainerRuntimeEndpoint, &cfg.ContainerRuntimeEndpoint)
	str(kc.CgroupDriver, &cfg.CgroupDriver)
	str(kc.Address, &cfg.Address)
	str(kc.PodLogsDir, &cfg.PodLogsDir)
	str(kc.PodCIDR, &cfg.PodCIDR)
	cfg.PodCIDRExplicit = kc.PodCIDR != ""
	str(kc.Logging.Format, &cfg.LogFormat)
	if kf.set["fileCheckFrequency"] {
		cfg.FileCheckFrequency = kc.FileCheckFrequency.Duration
	}
	if kf.set["maxPods"] {
		cfg.MaxPods = kc.MaxPods
	}
	if kf.set["readOnlyPort"] {
		cfg.ReadOnlyPort = kc.ReadOnlyPort
	}
	if kf.set["allowedUnsafeSysctls"] {
		cfg.AllowedUnsafeSysctls = kc.AllowedUnsafeSysctls
	}
}

func applyFlags(cfg *Config, fs *pflag.FlagSet) []error {
	cfg.PodCIDRExplicit = cfg.PodCIDRExplicit || fs.Changed(flagPodCIDR)
	cfg.CNIConfDirExplicit = fs.Changed(flagCNIConfDir)
	errs := []error{
		override(fs, flagRootDir, fs.GetString, &cfg.RootDir),
		override(fs, flagNodeName, fs.GetString, &cfg.NodeName),
		override(fs, flagPodCIDR, fs.GetString, &cfg.PodCIDR),
		override(fs, flagCNIBridge, fs.GetString, &cfg.CNIBridge),
		override(fs, flagCNIConfDir, fs.GetString, &cfg.CNIConfDir),
		override(fs, flagCNIBinDir, fs.GetString, &cfg.CNIBinDir),
		override(fs, flagContainerdBinary, fs.GetString, &cfg.ContainerdBinary),
		override(fs, flagClusterCIDR, fs.GetString, &cfg.ClusterCIDR),
		override(fs, flagPodManifestPath, fs.GetString, &cfg.StaticPodPath),
		override(fs, flagFileCheckFrequency, fs.GetDuration, &cfg.FileCheckFrequency),
		override(fs, flagContainerRuntimeEndpoint, fs.GetString, &cfg.ContainerRuntimeEndpoint),
		override(fs, flagCgroupDriver, fs.GetString, &cfg.CgroupDriver),
		override(fs, flagMaxPods, fs.GetInt32, &cfg.MaxPods),
		override(fs, flagReadOnlyPort, fs.GetInt32, &cfg.ReadOnlyPort),
		override(fs, flagAddress, fs.GetString, &cfg.Address),
		override(fs, flagPodLogsDir, fs.GetString, &cfg.PodLogsDir),
		override(fs, flagPauseBinary, fs.GetString, &cfg.PauseBinary),
		override(fs, flagRelistPeriod, fs.GetDuration, &cfg.RelistPeriod),
		override(fs, flagCgroupsPerQOS, fs.GetBool, &cfg.Resources.CgroupsPerQOS),
		override(fs, flagCgroupRoot, fs.GetString, &cfg.Resources.CgroupRoot),
		override(fs, flagPodMaxPids, fs.GetInt64, &cfg.Resources.PodPidsLimit),
		override(fs, flagDevicePluginDir, fs.GetString, &cfg.DevicePluginDir),
		override(fs, flagPodResourcesDir, fs.GetString, &cfg.PodResourcesDir),
		override(fs, flagPluginRegistrationDir, fs.GetString, &cfg.PluginRegistrationDir),
		override(fs, flagDevicePluginWait, fs.GetDuration, &cfg.DevicePluginWait),
		override(fs, flagImageGCHigh, fs.GetInt32, &cfg.Images.GCHighThresholdPercent),
		override(fs, flagImageGCLow, fs.GetInt32, &cfg.Images.GCLowThresholdPercent),
		override(fs, flagSerializeImagePulls, fs.GetBool, &cfg.Images.SerializePulls),
		override(fs, flagPinnedImage, fs.GetStringSlice, &cfg.Images.Pinned),
		override(fs, flagImageGCPeriod, fs.GetDuration, &cfg.Images.GCPeriod),
		override(fs, flagEvictionPressureTransitionPeriod, fs.GetDuration, &cfg.Eviction.PressureTransitionPeriod),
		override(fs, flagEvictionMaxPodGracePeriod, fs.GetInt32, &cfg.Eviction.MaxPodGracePeriod),
		override(fs, flagEvictionMonitoringInterval, fs.GetDuration, &cfg.Eviction.MonitoringInterval),
		override(fs, flagMinimumContainerTTL, fs.GetDuration, &cfg.ContainerGC.MinAge),
		override(fs, flagMaxPerPodContainer, fs.GetInt32, &cfg.ContainerGC.MaxPerPodContainer),
		override(fs, flagMaxContainers, fs.GetInt32, &cfg.ContainerGC.MaxContainers),
		override(fs, flagContainerGCPeriod, fs.GetDuration, &cfg.ContainerGC.Period),
		override(fs, flagAllowedUnsafeSysctls, fs.GetStringSlice, &cfg.AllowedUnsafeSysctls),
	}
	for _, f := range signalMapFlags(&cfg.Eviction) {
		if !fs.Changed(f.name) {
			continue
		}
		v, _ := fs.GetString(f.name)
		m, err := parseSignalMap(f.name, v, f.sep)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*f.dst = m
	}
	errs = append(errs, applyServingFlags(&cfg.Serving, fs)...)
	errs = append(errs, applyClusterFlags(&cfg.Cluster, fs)...)
	errs = append(errs, applyDNSFlags(&cfg.DNS, fs)...)
	// --log-level wins over its alias --v when both are given.
	var v string
	errs = append(errs, override(fs, flagV, fs.GetString, &v))
	if v != "" {
		cfg.LogLevel = levelFromVerbosity(v)
	}
	errs = append(errs, override(fs, flagLogLevel, fs.GetString, &cfg.LogLevel))
	errs = append(errs, override(fs, flagLoggingFormat, fs.GetString, &cfg.LogFormat))
	return errs
}

// override sets *dst from the named flag when the user gave it.
func override[T any](fs *pflag.FlagSet, name string, get func(string) (T, error), dst *T) error {
	if !fs.Changed(name) {
		return nil
	}
	v, err := get(name)
	if err != nil {
		return fmt.Errorf("--%s: %w", name, err)
	}
	*dst = v
	return nil
}

// levelFromVerbosity maps a kubelet --v number onto a log level: the
// kubelet's routine messages sit at 0-3 and its debugging output at 4 and
// above. Anything that is not a number is taken as a level name.
func levelFromVerbosity(v string) string {
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return v
	case n >= 4:
		return "debug"
	default:
		return "info"
	}
}

// fillHostDefaults fills the defaults that depend on other options or on the
// machine.
func fillHostDefaults(cfg *Config, h host) error {
	var errs []error
	if cfg.StaticPodPath == "" {
		cfg.StaticPodPath = filepath.Join(cfg.RootDir, ManifestsDirName)
	}
	if cfg.NodeName == "" {
		name, err := h.hostname()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: not set and the host name is unknown: %w", nameNodeName, err))
		}
		// The kubelet lower-cases the host name too: node names are DNS
		// subdomains and host names often are not lower case.
		cfg.NodeName = strings.ToLower(strings.TrimSpace(name))
	}
	// On failure PauseBinary keeps its configured value, so that Validate
	// does not report the same problem a second time.
	if pause, err := resolvePauseBinary(cfg.PauseBinary, h); err != nil {
		errs = append(errs, err)
		if cfg.PauseBinary == "" {
			cfg.PauseBinary = PauseBinaryName
		}
	} else {
		cfg.PauseBinary = pause
	}
	return errors.Join(errs...)
}

// resolvePauseBinary returns the absolute path of the sandbox program: the
// one configured, else berth-pause next to the berth executable (where a
// release puts it), else berth-pause in PATH.
func resolvePauseBinary(configured string, h host) (string, error) {
	if configured != "" {
		path, err := h.lookPath(configured)
		if err != nil {
			return "", fmt.Errorf("%s: %w", namePauseBinary, err)
		}
		return filepath.Abs(path)
	}
	var beside string
	if exe, err := h.executable(); err == nil {
		beside = filepath.Join(filepath.Dir(exe), PauseBinaryName)
		if path, err := h.lookPath(beside); err == nil {
			return filepath.Abs(path)
		}
	}
	if path, err := h.lookPath(PauseBinaryName); err == nil {
		return filepath.Abs(path)
	}
	where := "in PATH"
	if beside != "" {
		where = "at " + beside + " or in PATH"
	}
	return "", fmt.Errorf("%s: not set and no executable %s found %s", namePauseBinary, PauseBinaryName, where)
}

// writeBack records the effective value of every honoured field in the
// KubeletConfiguration, so that code reading it later agrees with Config.
func writeBack(kc *kubeletconfigv1beta1.KubeletConfiguration, cfg *Config) {
	kc.StaticPodPath = cfg.StaticPodPath
	kc.FileCheckFrequency = metav1.Duration{Duration: cfg.FileCheckFrequency}
	kc.ContainerRuntimeEndpoint = cfg.ContainerRuntimeEndpoint
	kc.CgroupDriver = cfg.CgroupDriver
	kc.MaxPods = cfg.MaxPods
	kc.ReadOnlyPort = cfg.ReadOnlyPort
	kc.Address = cfg.Address
	kc.PodLogsDir = cfg.PodLogsDir
	kc.PodCIDR = cfg.PodCIDR
	kc.Logging.Format = cfg.LogFormat
	kc.AllowedUnsafeSysctls = cfg.AllowedUnsafeSysctls
	ids := cfg.UserNamespacesIDsPerPod
	kc.UserNamespaces = &kubeletconfigv1beta1.UserNamespaces{IDsPerPod: &ids}
	writeBackServing(kc, cfg.Serving)
	cl := cfg.Cluster
	kc.RegisterNode = &cl.RegisterNode
	kc.RegisterWithTaints = cl.RegisterWithTaints
	kc.ProviderID = cl.ProviderID
	kc.RotateCertificates = cl.RotateCertificates
	kc.ServerTLSBootstrap = cl.ServerTLSBootstrap
	kc.NodeStatusUpdateFrequency = metav1.Duration{Duration: cl.NodeStatusUpdateFrequency}
	kc.NodeStatusReportFrequency = metav1.Duration{Duration: cl.NodeStatusReportFrequency}
	kc.NodeLeaseDurationSeconds = cl.NodeLeaseDurationSeconds
	r := cfg.Resources
	kc.CgroupsPerQOS = &r.CgroupsPerQOS
	kc.CgroupRoot = r.CgroupRoot
	kc.EnforceNodeAllocatable = r.EnforceNodeAllocatable
	kc.PodPidsLimit = &r.PodPidsLimit
	writeBackImages(kc, cfg.Images)
	writeBackEviction(kc, cfg.Eviction)
	writeBackMemory(kc, cfg.Memory)
	writeBackContainerLogs(kc, cfg.ContainerLogs)
	writeBackDNS(kc, cfg.DNS)
}
