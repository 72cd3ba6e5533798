package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/berth-dev/berth/internal/admission"
)

// Defaults. The kubelet's own default is used wherever berth has no reason
// to differ; see the package documentation for the two exceptions.
const (
	DefaultRootDir            = "/var/lib/berth"
	DefaultFileCheckFrequency = 20 * time.Second
	DefaultCgroupDriver       = "cgroupfs"
	DefaultMaxPods            = 110
	DefaultReadOnlyPort       = 10255
	DefaultAddress            = "127.0.0.1"
	DefaultPodLogsDir         = "/var/log/pods"
	DefaultPodCIDR            = "10.88.0.0/16"
	DefaultCNIBridge          = "berth0"
	// DefaultCNIConfDir is where the host's CNI configuration is looked
	// for (containerd's and the kubelet's default).
	DefaultCNIConfDir = "/etc/cni/net.d"
	// DefaultCNIBinDir is where Debian's containernetworking-plugins
	// install the plugins; the kubelet's and containerd's default is
	// /opt/cni/bin, where CNI DaemonSets (flannel, Calico, Cilium) copy
	// theirs: give --cni-bin-dir /opt/cni/bin for those.
	DefaultCNIBinDir = "/usr/lib/cni"
	// DefaultContainerdBinary is the containerd the managed runtime runs:
	// the host's, from PATH (Debian's containerd 1.6 where `make deps`
	// installed it).
	DefaultContainerdBinary = "containerd"
	DefaultRelistPeriod     = time.Second
	DefaultLogLevel         = "info"
	// DefaultDevicePluginDir and DefaultPodResourcesDir are the kubelet's
	// paths: device plugins and monitoring agents hard-code them.
	DefaultDevicePluginDir = "/var/lib/kubelet/device-plugins"
	DefaultPodResourcesDir = "/var/lib/kubelet/pod-resources"
	// DefaultPluginRegistrationDir is the kubelet's plugins_registry,
	// where DRA and CSI drivers put their registration sockets.
	DefaultPluginRegistrationDir = "/var/lib/kubelet/plugins_registry"
	DefaultDevicePluginWait      = 2 * time.Minute

	// PauseBinaryName is the sandbox program berth looks for next to its own
	// executable, then in PATH.
	PauseBinaryName = "berth-pause"
	// ManifestsDirName is the directory under the root dir that holds static
	// pod manifests when staticPodPath is not set.
	ManifestsDirName = "manifests"
)

// Config is berth's effective configuration.
type Config struct {
	// StaticPodPath is the directory of static pod manifests (staticPodPath,
	// --pod-manifest-path); <RootDir>/manifests when unset.
	StaticPodPath string
	// FileCheckFrequency is how often the manifest directory is re-read even
	// without a change notification (fileCheckFrequency).
	FileCheckFrequency time.Duration
	// ContainerRuntimeEndpoint is the CRI socket of an existing runtime; empty
	// means berth starts and owns its own containerd.
	ContainerRuntimeEndpoint string
	// CgroupDriver is always "cgroupfs" for now.
	CgroupDriver string
	MaxPods      int32
	// ReadOnlyPort is the port of the local read-only API; 0 disables it.
	ReadOnlyPort int32
	// Address is the IP the local API binds to.
	Address    string
	PodLogsDir string
	RootDir    string
	NodeName   string
	// PodCIDR is the range pod IPs come from (podCIDR, --pod-cidr).
	PodCIDR string
	// CNIBridge is the Linux bridge of the pod network berth sets up for its
	// managed containerd (--cni-bridge).
	CNIBridge string
	// PodCIDRExplicit says podCIDR was given (file or flag). In cluster
	// mode the Node's spec.podCIDR wins over it, as for the kubelet; one
	// that was not given is not used there at all: the network waits for
	// the Node's.
	PodCIDRExplicit bool
	// CNIConfDir is the host's CNI configuration dir (--cni-conf-dir);
	// CNIConfDirExplicit says it was given. When it holds a configuration
	// (always, when given), the managed containerd uses it and the plugins
	// of CNIBinDir (--cni-bin-dir) instead of berth's own bridge.
	CNIConfDir         string
	CNIConfDirExplicit bool
	CNIBinDir          string
	// ContainerdBinary is the containerd the managed runtime runs
	// (--containerd-binary): a name looked up in PATH or an absolute path.
	// The shim and runc in its directory are the ones it runs, so a
	// containerd 2 installed in a directory of its own needs no PATH change.
	ContainerdBinary string
	// ClusterCIDR (--cluster-cidr) is the range of every node's pods: the
	// traffic to it from this node's pods is not masqueraded. Empty keeps
	// the bridge plugin's masquerade, which NATs traffic to other nodes'
	// pods.
	ClusterCIDR string
	// PauseBinary is the absolute path of the sandbox program.
	PauseBinary string
	// RelistPeriod is how often the runtime is listed to catch what its
	// events missed.
	RelistPeriod time.Duration
	// LogLevel is one of debug, info, warn, error.
	LogLevel string
	// LogFormat is text or json (logging.format); empty picks text on a
	// terminal and JSON otherwise.
	LogFormat string
	// DevicePluginDir holds the device plugins' Registration socket
	// (kubelet.sock), their own sockets and the device checkpoint.
	DevicePluginDir string
	// PodResourcesDir holds the pod-resources API socket.
	PodResourcesDir string
	// PluginRegistrationDir is watched for the registration sockets of DRA
	// drivers (cluster mode).
	PluginRegistrationDir string
	// DevicePluginWait is how long a new pod that needs a device waits
	// (Pending, DevicePluginNotReady) for the resource's plugin to register
	// before it is rejected.
	DevicePluginWait time.Duration
	// AllowedUnsafeSysctls are the sysctls, or prefixes ending in '*', that
	// pods may set besides the safe ones (allowedUnsafeSysctls,
	// --allowed-unsafe-sysctls).
	AllowedUnsafeSysctls []string
	// Resources divides the node between the system and pods.
	Resources Resources
	// Images is how images are pulled and collected.
	Images Images
	// Eviction is when node resources are reclaimed and pods evicted.
	Eviction Eviction
	// Memory is how swap and out-of-memory kills are handled.
	Memory Memory
	// ContainerGC is how dead containers are collected.
	ContainerGC ContainerGC
	// ContainerLogs is how container log files are rotated.
	ContainerLogs ContainerLogs
	// Serving is the secure API.
	Serving Serving
	// Cluster is how berth joins a control plane; standalone without a
	// kubeconfig.
	Cluster Cluster
	// DNS is the resolver configuration of pods.
	DNS DNS
	// UserNamespacesIDsPerPod is how many host IDs each pod of
	// hostUsers: false gets (userNamespaces.idsPerPod).
	UserNamespacesIDsPerPod int64

	// BuildVersion is berth's own version, set by the binary (not
	// configurable): the Node reports it.
	BuildVersion string

	// Kubelet is the configuration file as decoded, with the fields berth
	// honours set to their effective values; a bare KubeletConfiguration when
	// there was no file.
	Kubelet *kubeletconfigv1beta1.KubeletConfiguration
	// Unimplemented lists, sorted, the top-level fields the file sets that
	// berth does not honour yet.
	Unimplemented []string
}

// Names used in messages: each option is named the way the user wrote it,
// by its KubeletConfiguration field and its flag, or by the flag alone when
// the file has no such field.
const (
	nameStaticPodPath            = "staticPodPath (--" + flagPodManifestPath + ")"
	nameFileCheckFrequency       = "fileCheckFrequency (--" + flagFileCheckFrequency + ")"
	nameContainerRuntimeEndpoint = "containerRuntimeEndpoint (--" + flagContainerRuntimeEndpoint + ")"
	nameCgroupDriver             = "cgroupDriver (--" + flagCgroupDriver + ")"
	nameMaxPods                  = "maxPods (--" + flagMaxPods + ")"
	nameReadOnlyPort             = "readOnlyPort (--" + flagReadOnlyPort + ")"
	nameAddress                  = "address (--" + flagAddress + ")"
	namePodLogsDir               = "podLogsDir (--" + flagPodLogsDir + ")"
	namePodCIDR                  = "podCIDR (--" + flagPodCIDR + ")"
	nameRootDir                  = "--" + flagRootDir
	nameNodeName                 = "--" + flagNodeName
	nameCNIBridge                = "--" + flagCNIBridge
	nameCNIConfDir               = "--" + flagCNIConfDir
	nameCNIBinDir                = "--" + flagCNIBinDir
	nameContainerdBinary         = "--" + flagContainerdBinary
	nameClusterCIDR              = "--" + flagClusterCIDR
	namePauseBinary              = "--" + flagPauseBinary
	nameRelistPeriod             = "--" + flagRelistPeriod
	nameLogLevel                 = "--" + flagLogLevel
	nameLogFormat                = "logging.format (--" + flagLoggingFormat + ")"
	nameDevicePluginDir          = "--" + flagDevicePluginDir
	namePodResourcesDir          = "--" + flagPodResourcesDir
	namePluginRegistrationDir    = "--" + flagPluginRegistrationDir
	nameDevicePluginWait         = "--" + flagDevicePluginWait
	nameAllowedUnsafeSysctls     = "allowedUnsafeSysctls (--" + flagAllowedUnsafeSysctls + ")"
)

// Validate reports every invalid value at once; each error names the field
// and the reason.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, c.validateDirsAndPeriods()...)
	errs = append(errs, c.validateNodeAndLogging()...)
	errs = append(errs, c.Resources.validate()...)
	errs = append(errs, c.Images.validate()...)
	errs = append(errs, c.Eviction.validate()...)
	errs = append(errs, c.Memory.validate()...)
	errs = append(errs, c.ContainerGC.validate()...)
	errs = append(errs, c.ContainerLogs.validate()...)
	errs = append(errs, c.validateServing()...)
	errs = append(errs, c.validateCluster()...)
	errs = append(errs, c.DNS.validate()...)
	errs = append(errs, validateUnsafeSysctls(c.AllowedUnsafeSysctls), validateIDsPerPod(c.UserNamespacesIDsPerPod))
	return errors.Join(errs...)
}

// fieldError is a validation error naming its field.
func fieldError(name, format string, args ...any) error {
	return fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
}

// validateDirsAndPeriods checks the dirs berth works in, the runtime
// endpoint and cgroup driver, and the periods of its loops.
func (c *Config) validateDirsAndPeriods() []error {
	var errs []error
	bad := func(name, format string, args ...any) { errs = append(errs, fieldError(name, format, args...)) }
	absDir := func(name, value string) {
		switch {
		case value == "":
			bad(name, "must not be empty")
		case !filepath.IsAbs(value):
			bad(name, "%q must be an absolute path", value)
		}
	}
	absDir(nameRootDir, c.RootDir)
	absDir(nameStaticPodPath, c.StaticPodPath)
	absDir(namePodLogsDir, c.PodLogsDir)
	absDir(nameDevicePluginDir, c.DevicePluginDir)
	absDir(namePodResourcesDir, c.PodResourcesDir)
	absDir(namePluginRegistrationDir, c.PluginRegistrationDir)
	if c.DevicePluginWait < 0 {
		bad(nameDevicePluginWait, "%s must not be negative", c.DevicePluginWait)
	}
	if c.FileCheckFrequency <= 0 {
		bad(nameFileCheckFrequency, "%s must be positive", c.FileCheckFrequency)
	}
	if c.RelistPeriod <= 0 {
		bad(nameRelistPeriod, "%s must be positive", c.RelistPeriod)
	}
	if err := validateEndpoint(c.ContainerRuntimeEndpoint); err != nil {
		bad(nameContainerRuntimeEndpoint, "%v", err)
	}
	switch c.CgroupDriver {
	case "cgroupfs":
	case "systemd":
		bad(nameCgroupDriver, "systemd is not supported yet; use cgroupfs")
	default:
		bad(nameCgroupDriver, "%q is not a cgroup driver; use cgroupfs", c.CgroupDriver)
	}
	return errs
}

// validateNodeAndLogging checks the node's identity, addresses and pod
// network, and berth's own logging.
func (c *Config) validateNodeAndLogging() []error {
	var errs []error
	bad := func(name, format string, args ...any) { errs = append(errs, fieldError(name, format, args...)) }
	if c.MaxPods < 1 {
		bad(nameMaxPods, "%d must be at least 1", c.MaxPods)
	}
	if c.ReadOnlyPort < 0 || c.ReadOnlyPort > 65535 {
		bad(nameReadOnlyPort, "%d is out of range 0-65535 (0 disables the API)", c.ReadOnlyPort)
	}
	if net.ParseIP(c.Address) == nil {
		bad(nameAddress, "%q is not an IP address", c.Address)
	}
	if _, err := netip.ParsePrefix(c.PodCIDR); err != nil {
		bad(namePodCIDR, "%q is not a CIDR: %v", c.PodCIDR, err)
	}
	if c.NodeName == "" {
		bad(nameNodeName, "must not be empty")
	} else if msgs := validation.IsDNS1123Subdomain(c.NodeName); len(msgs) > 0 {
		bad(nameNodeName, "%q is not a valid node name: %s", c.NodeName, strings.Join(msgs, "; "))
	}
	if err := validateInterfaceName(c.CNIBridge); err != nil {
		bad(nameCNIBridge, "%v", err)
	}
	if c.CNIConfDir != "" && !filepath.IsAbs(c.CNIConfDir) {
		bad(nameCNIConfDir, "%q must be an absolute path", c.CNIConfDir)
	}
	if c.CNIBinDir != "" && !filepath.IsAbs(c.CNIBinDir) {
		bad(nameCNIBinDir, "%q must be an absolute path", c.CNIBinDir)
	}
	c.validateContainerdBinary(bad)
	if c.ClusterCIDR != "" {
		cluster, err := netip.ParsePrefix(c.ClusterCIDR)
		pod, perr := netip.ParsePrefix(c.PodCIDR)
		switch {
		case err != nil:
			bad(nameClusterCIDR, "%q is not a CIDR: %v", c.ClusterCIDR, err)
		case !cluster.Addr().Is4():
			bad(nameClusterCIDR, "%q: only IPv4 is supported", c.ClusterCIDR)
		case perr == nil && c.PodCIDRExplicit && !cluster.Overlaps(pod):
			bad(nameClusterCIDR, "%q does not hold podCIDR %q", c.ClusterCIDR, c.PodCIDR)
		}
	}
	if c.PauseBinary == "" {
		bad(namePauseBinary, "must not be empty")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad(nameLogLevel, "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	switch c.LogFormat {
	case "", "text", "json":
	default:
		bad(nameLogFormat, "%q is not one of text, json", c.LogFormat)
	}
	return errs
}

// validateUnsafeSysctls refuses what the kubelet refuses to start with: a
// pattern its sysctl allowlist cannot hold (NewMainKubelet, through
// sysctl.NewAllowlist), with the same check, here so that the error names
// the option.
func validateUnsafeSysctls(patterns []string) error {
	if _, err := admission.NewSysctlAllowlist(patterns); err != nil {
		return fmt.Errorf("%s: %w", nameAllowedUnsafeSysctls, err)
	}
	return nil
}

// validateEndpoint accepts what berth can dial: a unix socket, written as the
// kubelet does (unix:///path) or as a bare absolute path. Empty means the
// managed runtime.
func validateEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	path := endpoint
	if scheme, rest, ok := strings.Cut(endpoint, "://"); ok {
		if scheme != "unix" {
			return fmt.Errorf("%q: only unix sockets are supported (unix:///path/to/socket)", endpoint)
		}
		path = rest
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%q: the socket path must be absolute", endpoint)
	}
	return nil
}

// validateInterfaceName applies the kernel's rules for a network device
// name (dev_valid_name): 1 to 15 bytes, no '/', ':' or white space, and not
// "." or "..".
func validateInterfaceName(name string) error {
	const maxLen = 15 // IFNAMSIZ - 1
	switch {
	case name == "":
		return errors.New("must not be empty")
	case len(name) > maxLen:
		return fmt.Errorf("%q is longer than %d bytes", name, maxLen)
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a valid interface name", name)
	case strings.ContainsAny(name, "/: \t\n\v\f\r"):
		return fmt.Errorf("%q must not contain '/', ':' or white space", name)
	}
	return nil
}

// validateContainerdBinary refuses a containerd binary that is neither a
// bare name for PATH nor an absolute path, and one given with an external
// runtime, which berth does not start.
func (c *Config) validateContainerdBinary(bad func(field, format string, args ...any)) {
	switch bin := c.ContainerdBinary; {
	case bin == "": // the default
	case strings.ContainsRune(bin, '/') && !filepath.IsAbs(bin):
		bad(nameContainerdBinary, "%q must be an absolute path or a name looked up in PATH", bin)
	case c.ContainerRuntimeEndpoint != "" && bin != DefaultContainerdBinary:
		bad(nameContainerdBinary, "%q is for berth's managed containerd, but %s names a runtime you run yourself", bin, nameContainerRuntimeEndpoint)
	}
}
