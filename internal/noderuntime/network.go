package noderuntime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/network"
)

// cniNetworkName is the CNI network of berth's managed runtime.
const cniNetworkName = "berth"

// ReasonPodCIDRChanged is the node event of a new pod CIDR.
const ReasonPodCIDRChanged = "PodCIDRChanged"

// masqTimeout bounds setting up the masquerade chain.
const masqTimeout = 30 * time.Second

// cniIPAMDir is where host-local keeps the managed runtime's leases.
func cniIPAMDir(cfg *config.Config) string { return filepath.Join(cfg.RootDir, "cni", "ipam") }

// berthConfDir is the conf dir of berth's own bridge network.
func berthConfDir(cfg *config.Config) string { return filepath.Join(cfg.RootDir, "cni", "net.d") }

// podNetwork is the managed runtime's pod network: the host's CNI
// configuration, or berth's bridge on the pod CIDR. It owns the CIDR and
// the conflist berth writes; SetPodCIDR and Problem may be called from
// any goroutine.
type podNetwork struct {
	cfg *config.Config
	// host: containerd reads the host's conf dir, berth writes nothing.
	host             bool
	confDir, binDir  string
	record           func(eventType, reason, message string)
	gc               func() *cnigc.Collector
	logInfo, logWarn func(msg string, args ...any)

	mu sync.Mutex
	// cidr is the bridge's range, "" until known; earlier the node's
	// earlier ones, whose pods keep their addresses.
	cidr    string
	earlier []string
}

// HostMode says whether the managed containerd uses the host's CNI
// configuration: when --cni-conf-dir was given, or when the default dir
// holds a configuration at start. A CNI DaemonSet that writes its
// configuration after berth started needs --cni-conf-dir (or a restart).
func HostMode(cfg *config.Config) bool {
	if cfg.CNIConfDirExplicit {
		return true
	}
	files, err := network.ConfFiles(cfg.CNIConfDir)
	return err == nil && len(files) > 0
}

// InitialPodCIDR is the bridge's range at start: --pod-cidr standalone; in
// cluster mode the one given explicitly until the Node has its own (the
// kubelet's updatePodCIDR of its configured podCIDR at start), else none
// until the Node's spec.podCIDR is known.
func InitialPodCIDR(cfg *config.Config) string {
	if cfg.Cluster.Enabled() && !cfg.PodCIDRExplicit {
		return ""
	}
	return cfg.PodCIDR
}

// start makes the network's files before containerd starts.
func (n *podNetwork) start() error {
	if n.host {
		n.logInfo("using the host's CNI configuration", "confDir", n.confDir, "binDir", n.binDir)
		return nil
	}
	if err := os.MkdirAll(n.confDir, 0o755); err != nil {
		return fmt.Errorf("CNI conf dir: %w", err)
	}
	cidr := n.cidr
	n.cidr = ""
	if cidr == "" {
		// A conflist of an earlier run must not serve pods before the
		// Node says which range is this node's.
		err := os.Remove(filepath.Join(n.confDir, network.ConfListName))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the earlier CNI conflist: %w", err)
		}
		n.logInfo("the pod network waits for the Node's spec.podCIDR")
		return nil
	}
	return n.SetPodCIDR(cidr)
}

// SetPodCIDR makes cidr the range of new pods (the Node's spec.podCIDR
// came or changed). Pods running keep their addresses: a new range gets
// a bridge of its own (network.BridgeFor). A no-op with the host's CNI.
func (n *podNetwork) SetPodCIDR(cidr string) error {
	if n.host {
		return nil
	}
	if _, err := netip.ParsePrefix(cidr); err != nil {
		return fmt.Errorf("pod CIDR %q: %w", cidr, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if cidr == n.cidr {
		return nil
	}
	if err := n.ensureMasquerade(cidr); err != nil {
		return err
	}
	addrs, err := network.InterfaceAddrs(n.cfg.CNIBridge)
	if err != nil {
		return err
	}
	bridge := network.BridgeFor(n.cfg.CNIBridge, cidr, addrs)
	err = network.WriteConfList(n.confDir, network.Bridge{
		Name: cniNetworkName, Interface: bridge, PodCIDR: cidr,
		IPAMDir: cniIPAMDir(n.cfg), ClusterCIDR: n.cfg.ClusterCIDR,
	})
	if err != nil {
		return err
	}
	old := n.cidr
	if old != "" && !slices.Contains(n.earlier, old) {
		n.earlier = append(n.earlier, old)
	}
	n.cidr = cidr
	if gc := n.gc(); gc != nil {
		gc.SetNetwork(n.gcNetwork())
	}
	if old != "" && old == n.cfg.PodCIDR && n.cfg.PodCIDRExplicit && n.cfg.Cluster.Enabled() {
		n.logWarn("the Node's spec.podCIDR differs from --pod-cidr; the Node's is used, as by the kubelet", "podCIDR", n.cfg.PodCIDR, "node", cidr)
	}
	if old != "" {
		msg := fmt.Sprintf("pod CIDR changed from %s to %s (bridge %s): running pods keep their addresses, new pods get the new range", old, cidr, bridge)
		n.logInfo(msg)
		n.record(v1.EventTypeNormal, ReasonPodCIDRChanged, msg)
	} else {
		n.logInfo("pod network ready", "podCIDR", cidr, "bridge", bridge)
	}
	return nil
}

// gcNetwork is the network the GC may collect on; n.mu held.
func (n *podNetwork) gcNetwork() cnigc.Network {
	net := cnigc.Network{Name: cniNetworkName}
	if p, err := netip.ParsePrefix(n.cidr); err == nil {
		net.PodCIDR = p
	}
	for _, c := range n.earlier {
		if p, err := netip.ParsePrefix(c); err == nil {
			net.Earlier = append(net.Earlier, p)
		}
	}
	return net
}

// ensureMasquerade sets up berth's masquerade chain for cidr when a
// cluster CIDR is given (network.MasqueradeScript says why).
func (n *podNetwork) ensureMasquerade(cidr string) error {
	if n.cfg.ClusterCIDR == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), masqTimeout)
	defer cancel()
	tables := cnigc.IPTables{}
	save, err := tables.SaveNAT(ctx)
	if err != nil {
		return err
	}
	nat, err := cnigc.ParseNAT(save)
	if err != nil {
		return err
	}
	hasJump := slices.ContainsFunc(nat.Rules, func(r cnigc.Rule) bool {
		return r.Chain == "POSTROUTING" && r.Comment() == network.MasqComment(cidr)
	})
	if err := tables.Restore(ctx, network.MasqueradeScript(cidr, n.cfg.ClusterCIDR, hasJump)); err != nil {
		return fmt.Errorf("masquerade chain for pod CIDR %s: %w", cidr, err)
	}
	return nil
}

// Problem says why the network cannot give new pods an address, ""
// when it can: the host's configuration is missing or invalid, or the
// Node has no podCIDR yet.
func (n *podNetwork) Problem() string {
	if n.host {
		return network.HostConfProblem(n.confDir, n.binDir)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cidr == "" {
		return "waiting for the Node's spec.podCIDR (kube-controller-manager --allocate-node-cidrs assigns it; --pod-cidr gives one meanwhile)"
	}
	return ""
}

// newNetworkGC returns the collector of the pod network state the managed
// runtime left behind, or nil for an external runtime, whose CNI state is
// not berth's to touch, and for the host's CNI configuration, whose
// network (its name, its IPAM, its plugins' rules) is the CNI's own. The
// kubelet leaves this to the runtime (containerd 2's CNI GC); berth's
// containerd 1.6 and plugins 1.1.1 have none, so berth, which owns the
// network, does it.
func newNetworkGC(cfg *config.Config, r *Runtime) (*cnigc.Collector, error) {
	if r.managed == nil || r.net == nil || r.net.host {
		return nil, nil
	}
	r.net.mu.Lock()
	net := r.net.gcNetwork()
	r.net.mu.Unlock()
	return cnigc.New(cnigc.Options{
		Network: net,
		Tables:  cnigc.IPTables{},
		Leases:  cnigc.LeaseDir(filepath.Join(cniIPAMDir(cfg), cniNetworkName)),
		Results: cnigc.ResultCache{Dir: cnigc.DefaultResultsDir, Network: cniNetworkName, IPAMDir: cniIPAMDir(cfg)},
		Sandboxes: func(ctx context.Context) (map[string]bool, error) {
			sbs, err := r.CRI.ListPodSandboxes(ctx, nil)
			if err != nil {
				return nil, err
			}
			known := make(map[string]bool, len(sbs))
			for _, sb := range sbs {
				known[sb.Id] = true
			}
			return known, nil
		},
		Clock:  clock.RealClock{},
		Record: r.record,
		Log:    r.log.With("component", "network-gc"),
	}), nil
}
