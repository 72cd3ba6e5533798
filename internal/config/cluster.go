package config

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Cluster is how berth joins a Kubernetes control plane as a Node. Without
// a kubeconfig berth is standalone and none of it applies.
type Cluster struct {
	// KubeconfigPath is the kubeconfig berth reaches the API server with
	// (--kubeconfig); empty means standalone.
	KubeconfigPath string
	// BootstrapKubeconfigPath is --bootstrap-kubeconfig (a flag only, as
	// the kubelet's): the API server, its CA and a bootstrap token, to
	// request a client certificate with when KubeconfigPath is missing or
	// its certificate cannot be used; KubeconfigPath is then written.
	BootstrapKubeconfigPath string
	// RotateCertificates renews the client certificate before it expires
	// (rotateCertificates, --rotate-certificates).
	RotateCertificates bool
	// ServerTLSBootstrap gets the secure API's certificate from a
	// kubelet-serving CSR and renews it (serverTLSBootstrap).
	ServerTLSBootstrap bool
	// RegisterNode creates the Node object when it does not exist
	// (registerNode).
	RegisterNode bool
	// RegisterWithTaints are the taints the Node is created with
	// (registerWithTaints).
	RegisterWithTaints []v1.Taint
	// NodeLabels are added to the Node's labels at registration
	// (--node-labels).
	NodeLabels map[string]string
	// ProviderID is the Node's spec.providerID (providerID).
	ProviderID string
	// NodeIP is the Node's InternalIP, where the API server reaches the
	// secure API (--node-ip); empty picks the host's address.
	NodeIP string
	// NodeStatusUpdateFrequency is how often the node's status is computed
	// and, when it changed, posted (nodeStatusUpdateFrequency).
	NodeStatusUpdateFrequency time.Duration
	// NodeStatusReportFrequency is how often an unchanged status is posted
	// anyway (nodeStatusReportFrequency); the Lease is the heartbeat.
	NodeStatusReportFrequency time.Duration
	// NodeLeaseDurationSeconds is the Lease's duration; it is renewed every
	// quarter of it (nodeLeaseDurationSeconds).
	NodeLeaseDurationSeconds int32
}

// The kubelet's defaults.
const (
	DefaultNodeStatusUpdateFrequency = 10 * time.Second
	DefaultNodeStatusReportFrequency = 5 * time.Minute
	DefaultNodeLeaseDurationSeconds  = 40
	// DefaultClusterPort is the secure API's port when berth joins a
	// cluster: the API server calls the kubelet there.
	DefaultClusterPort = 10250
)

// Enabled reports whether berth joins a cluster.
func (c Cluster) Enabled() bool { return c.KubeconfigPath != "" }

func defaultCluster() Cluster {
	return Cluster{
		RegisterNode:              true,
		NodeStatusUpdateFrequency: DefaultNodeStatusUpdateFrequency,
		NodeStatusReportFrequency: DefaultNodeStatusReportFrequency,
		NodeLeaseDurationSeconds:  DefaultNodeLeaseDurationSeconds,
	}
}

const (
	flagKubeconfig                = "kubeconfig"
	flagBootstrapKubeconfig       = "bootstrap-kubeconfig"
	flagRotateCertificates        = "rotate-certificates"
	flagRegisterNode              = "register-node"
	flagRegisterWithTaints        = "register-with-taints"
	flagNodeLabels                = "node-labels"
	flagProviderID                = "provider-id"
	flagNodeIP                    = "node-ip"
	flagNodeStatusUpdateFrequency = "node-status-update-frequency"

	nameKubeconfig                = "--" + flagKubeconfig
	nameBootstrapKubeconfig       = "--" + flagBootstrapKubeconfig
	nameServerTLSBootstrap        = "serverTLSBootstrap"
	nameRegisterWithTaints        = "registerWithTaints (--" + flagRegisterWithTaints + ")"
	nameNodeLabels                = "--" + flagNodeLabels
	nameNodeIP                    = "--" + flagNodeIP
	nameNodeStatusUpdateFrequency = "nodeStatusUpdateFrequency (--" + flagNodeStatusUpdateFrequency + ")"
	nameNodeStatusReportFrequency = "nodeStatusReportFrequency"
	nameNodeLeaseDurationSeconds  = "nodeLeaseDurationSeconds"
)

func addClusterFlags(fs *pflag.FlagSet) {
	fs.String(flagKubeconfig, "", "kubeconfig of the API server to join as a Node; empty runs standalone")
	fs.String(flagBootstrapKubeconfig, "", "kubeconfig with the API server, its CA and a bootstrap token: when --kubeconfig is missing or its certificate cannot be used, berth requests a client certificate with it and writes --kubeconfig")
	fs.Bool(flagRotateCertificates, false, "renew the client certificate from the API server before it expires")
	fs.Bool(flagRegisterNode, true, "create the Node object in the API server when it does not exist")
	fs.StringSlice(flagRegisterWithTaints, nil, "taints the Node registers with, key=value:Effect, comma-separated")
	fs.StringToString(flagNodeLabels, nil, "labels added to the Node at registration, key=value, comma-separated")
	fs.String(flagProviderID, "", "the Node's spec.providerID")
	fs.String(flagNodeIP, "", "the Node's InternalIP, where the API server reaches the secure API (default: the host's address)")
	fs.Duration(flagNodeStatusUpdateFrequency, DefaultNodeStatusUpdateFrequency, "how often the node's status is computed and posted when it changed")
}

func applyClusterFile(c *Cluster, kc *kubeletconfigv1beta1.KubeletConfiguration, set map[string]bool) {
	if kc.RegisterNode != nil {
		c.RegisterNode = *kc.RegisterNode
	}
	if set["registerWithTaints"] {
		c.RegisterWithTaints = kc.RegisterWithTaints
	}
	if kc.RotateCertificates {
		c.RotateCertificates = true
	}
	if kc.ServerTLSBootstrap {
		c.ServerTLSBootstrap = true
	}
	if kc.ProviderID != "" {
		c.ProviderID = kc.ProviderID
	}
	if set["nodeStatusUpdateFrequency"] {
		c.NodeStatusUpdateFrequency = kc.NodeStatusUpdateFrequency.Duration
	}
	if set["nodeStatusReportFrequency"] {
		c.NodeStatusReportFrequency = kc.NodeStatusReportFrequency.Duration
	}
	if set["nodeLeaseDurationSeconds"] {
		c.NodeLeaseDurationSeconds = kc.NodeLeaseDurationSeconds
	}
}

func applyClusterFlags(c *Cluster, fs *pflag.FlagSet) []error {
	errs := []error{
		override(fs, flagKubeconfig, fs.GetString, &c.KubeconfigPath),
		override(fs, flagBootstrapKubeconfig, fs.GetString, &c.BootstrapKubeconfigPath),
		override(fs, flagRotateCertificates, fs.GetBool, &c.RotateCertificates),
		override(fs, flagRegisterNode, fs.GetBool, &c.RegisterNode),
		override(fs, flagProviderID, fs.GetString, &c.ProviderID),
		override(fs, flagNodeIP, fs.GetString, &c.NodeIP),
		override(fs, flagNodeStatusUpdateFrequency, fs.GetDuration, &c.NodeStatusUpdateFrequency),
		override(fs, flagNodeLabels, fs.GetStringToString, &c.NodeLabels),
	}
	// berth may change directory later (it never does today); a relative
	// kubeconfig is the caller's, so pin it now.
	for name, path := range map[string]*string{nameKubeconfig: &c.KubeconfigPath, nameBootstrapKubeconfig: &c.BootstrapKubeconfigPath} {
		if *path != "" && !filepath.IsAbs(*path) {
			abs, err := filepath.Abs(*path)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
			*path = abs
		}
	}
	if fs.Changed(flagRegisterWithTaints) {
		specs, _ := fs.GetStringSlice(flagRegisterWithTaints)
		taints, err := parseTaints(specs)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", nameRegisterWithTaints, err))
		}
		c.RegisterWithTaints = taints
	}
	return errs
}

// parseTaints reads the kubelet's key=value:Effect (or key:Effect) form.
func parseTaints(specs []string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, s := range specs {
		kv, effect, ok := strings.Cut(s, ":")
		if !ok {
			return nil, fmt.Errorf("%q: want key=value:Effect", s)
		}
		key, value, _ := strings.Cut(kv, "=")
		out = append(out, v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)})
	}
	return out, nil
}

// validateCluster checks the cluster options; they are checked even when
// no kubeconfig is given, so a typo is found before it matters.
func (c *Config) validateCluster() []error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	cl := c.Cluster
	if cl.NodeStatusUpdateFrequency <= 0 {
		bad(nameNodeStatusUpdateFrequency, "%s must be positive", cl.NodeStatusUpdateFrequency)
	}
	if cl.NodeStatusReportFrequency <= 0 {
		bad(nameNodeStatusReportFrequency, "%s must be positive", cl.NodeStatusReportFrequency)
	}
	if cl.NodeLeaseDurationSeconds <= 0 {
		bad(nameNodeLeaseDurationSeconds, "%d must be positive", cl.NodeLeaseDurationSeconds)
	}
	if cl.BootstrapKubeconfigPath != "" && cl.KubeconfigPath == "" {
		bad(nameBootstrapKubeconfig, "needs %s: the file berth writes once it has its client certificate", nameKubeconfig)
	}
	if cl.ServerTLSBootstrap && cl.KubeconfigPath == "" {
		bad(nameServerTLSBootstrap, "needs %s: the serving certificate is requested from the API server", nameKubeconfig)
	}
	if cl.NodeIP != "" && net.ParseIP(cl.NodeIP) == nil {
		bad(nameNodeIP, "%q is not an IP address", cl.NodeIP)
	}
	keys := make([]string, 0, len(cl.NodeLabels))
	for k := range cl.NodeLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, msg := range validation.IsQualifiedName(k) {
			bad(nameNodeLabels, "label key %q: %s", k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(cl.NodeLabels[k]) {
			bad(nameNodeLabels, "label %q value %q: %s", k, cl.NodeLabels[k], msg)
		}
	}
	for i, t := range cl.RegisterWithTaints {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			bad(nameRegisterWithTaints, "[%d] key %q: %s", i, t.Key, msg)
		}
		switch t.Effect {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			bad(nameRegisterWithTaints, "[%d] effect %q: must be NoSchedule, PreferNoSchedule or NoExecute", i, t.Effect)
		}
	}
	return errs
}
