package noderuntime

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"

	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/config"
)

// cniNetworkName is the CNI network of berth's managed runtime.
const cniNetworkName = "berth"

// cniIPAMDir is where host-local keeps the managed runtime's leases.
func cniIPAMDir(cfg *config.Config) string { return filepath.Join(cfg.RootDir, "cni", "ipam") }

// newNetworkGC returns the collector of the pod network state the managed
// runtime left behind, or nil for an external runtime, whose CNI state is
// not berth's to touch. The kubelet leaves this to the runtime
// (containerd 2's CNI GC); berth's containerd 1.6 and plugins 1.1.1 have
// none, so berth, which owns the network, does it.
func newNetworkGC(cfg *config.Config, r *Runtime) (*cnigc.Collector, error) {
	if r.managed == nil {
		return nil, nil
	}
	cidr, err := netip.ParsePrefix(cfg.PodCIDR)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", cfg.PodCIDR, err)
	}
	return cnigc.New(cnigc.Options{
		Network: cnigc.Network{Name: cniNetworkName, PodCIDR: cidr},
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
