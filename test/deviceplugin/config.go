package deviceplugin

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/utils/clock"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// What Allocate puts into every container answer, so a test can find the
// devices inside the container.
const (
	EnvDevices            = "WIDGET_DEVICES"
	AnnotationDeviceIDs   = "example.com/widget-ids"
	DefaultDeviceHostPath = "/dev/null"
)

const (
	defaultRPCTimeout    = 10 * time.Second
	defaultRetryInterval = 5 * time.Second
	// maxSocketPath is the room in sockaddr_un.sun_path, less the NUL.
	maxSocketPath = 107
	// kubeletSocketName is the registration socket's base name in Dir.
	kubeletSocketName = "kubelet.sock"
)

// Device is one device the plugin advertises.
type Device struct {
	ID string
	// NUMA lists the NUMA nodes the device is attached to; empty means the
	// device reports no topology.
	NUMA []int64
}

// Config describes a plugin. Devices and ResourceName are advertised as
// given, even when malformed, so that the node agent's handling of bad
// input can be tested.
type Config struct {
	// Dir holds the agent's kubelet.sock and the plugin's own socket
	// (pluginapi.DevicePluginPath on a real node). It must be absolute.
	Dir string
	// ResourceName is the extended resource, e.g. "example.com/widget".
	ResourceName string
	// SocketName is the base name of the plugin's socket in Dir.
	SocketName string
	Devices    []Device

	PreStartRequired                bool
	GetPreferredAllocationAvailable bool

	// DeviceHostPath is the HostPath of every DeviceSpec Allocate answers
	// with; "" means DefaultDeviceHostPath.
	DeviceHostPath string
	// Mounts maps a device ID to the mounts Allocate adds for it. Devices
	// without an entry get no mounts.
	Mounts map[string][]*pluginapi.Mount

	// RegisterVersion and RegisterEndpoint override what the plugin sends
	// to Registration.Register ("" means pluginapi.Version and SocketName),
	// for testing how the agent refuses a bad registration.
	RegisterVersion  string
	RegisterEndpoint string

	// RPCTimeout bounds each Register call; 0 means 10s.
	RPCTimeout time.Duration
	// RetryInterval is how long the plugin waits before trying again after
	// a re-registration it started by itself failed; 0 means 5s.
	RetryInterval time.Duration
	// Clock times the retries; nil means the real clock.
	Clock clock.Clock
	// Logger receives the plugin's logs; nil means slog.Default().
	Logger *slog.Logger
}

// withDefaults returns c with its zero values filled in.
func (c Config) withDefaults() Config {
	if c.DeviceHostPath == "" {
		c.DeviceHostPath = DefaultDeviceHostPath
	}
	if c.RegisterVersion == "" {
		c.RegisterVersion = pluginapi.Version
	}
	if c.RegisterEndpoint == "" {
		c.RegisterEndpoint = c.SocketName
	}
	if c.RPCTimeout == 0 {
		c.RPCTimeout = defaultRPCTimeout
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = defaultRetryInterval
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate checks what the plugin itself needs to run; it leaves alone what
// it only forwards to the agent.
func (c Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("deviceplugin config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if !filepath.IsAbs(c.Dir) {
		bad("Dir", "must be an absolute path, got %q", c.Dir)
	}
	switch {
	case c.SocketName == "":
		bad("SocketName", "must not be empty")
	case strings.ContainsRune(c.SocketName, '/') || c.SocketName == "." || c.SocketName == "..":
		bad("SocketName", "must be a file name without a directory, got %q", c.SocketName)
	case c.SocketName == kubeletSocketName:
		bad("SocketName", "%q is the agent's registration socket", c.SocketName)
	}
	for _, p := range []string{filepath.Join(c.Dir, c.SocketName), filepath.Join(c.Dir, kubeletSocketName)} {
		if len(p) > maxSocketPath {
			bad("Dir", "socket path %q is %d bytes long; a unix socket path holds at most %d", p, len(p), maxSocketPath)
		}
	}
	if c.RPCTimeout < 0 {
		bad("RPCTimeout", "must not be negative, got %v", c.RPCTimeout)
	}
	if c.RetryInterval < 0 {
		bad("RetryInterval", "must not be negative, got %v", c.RetryInterval)
	}
	return errors.Join(errs...)
}
