// Package network sets up the pod network berth gives its managed runtime:
// one CNI bridge with host-local IPAM on the pod CIDR, port mappings for
// hostPort, and the node's own address.
package network

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-dev/berth/internal/atomicfile"
)

// ConfListName is the file berth writes into the runtime's CNI conf dir.
const ConfListName = "10-berth.conflist"

// Bridge describes berth's pod network.
type Bridge struct {
	Name      string // CNI network name
	Interface string // Linux bridge device, e.g. berth0
	PodCIDR   string
	// IPAMDir keeps host-local's leases under berth's root, so they are
	// berth's to clean and never collide with another runtime's.
	IPAMDir string
	// ClusterCIDR, when set, is the range of every node's pods. The bridge
	// plugin's own masquerade exempts only this bridge's subnet, so it
	// would NAT the traffic to the pods of the other nodes, which the
	// Kubernetes network model forbids; with a cluster CIDR the plugin's is
	// off and berth masquerades in a chain of its own that exempts the
	// whole cluster CIDR (MasqueradeScript). Without one, the plugin's
	// masquerade stays, as before.
	ClusterCIDR string
}

// ConfList renders the CNI network configuration list for b: bridge with
// host-local IPAM, then portmap for hostPort. The runtime adds loopback itself.
func ConfList(b Bridge) ([]byte, error) {
	if _, _, err := net.ParseCIDR(b.PodCIDR); err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", b.PodCIDR, err)
	}
	type obj = map[string]any
	conf := obj{
		"cniVersion": "1.0.0",
		"name":       b.Name,
		"plugins": []obj{
			{
				"type":        "bridge",
				"bridge":      b.Interface,
				"isGateway":   true,
				"ipMasq":      b.ClusterCIDR == "",
				"hairpinMode": true,
				"ipam": obj{
					"type":    "host-local",
					"ranges":  [][]obj{{{"subnet": b.PodCIDR}}},
					"routes":  []obj{{"dst": "0.0.0.0/0"}},
					"dataDir": b.IPAMDir,
				},
			},
			{"type": "portmap", "capabilities": obj{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// WriteConfList writes b's conflist into dir atomically (the runtime watches
// the dir and must never read half a file).
func WriteConfList(dir string, b Bridge) error {
	data, err := ConfList(b)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("CNI conf dir: %w", err)
	}
	return atomicfile.Write(filepath.Join(dir, ConfListName), data, 0o644)
}

// BridgeFor returns the Linux bridge of cidr: base (--cni-bridge) while
// base has no IPv4 address outside cidr, else a name derived from base and
// cidr. A pod CIDR that changes while pods run gets a bridge of its own:
// the bridge plugin gives a bridge one IPv4 gateway address and refuses
// another, so the old pods keep their bridge, gateway and addresses, and
// the new ones get the new range on the new bridge. baseAddrs are base's
// addresses now (none when it does not exist).
func BridgeFor(base, cidr string, baseAddrs []netip.Prefix) string {
	want, err := netip.ParsePrefix(cidr)
	if err != nil {
		return base
	}
	taken := slices.ContainsFunc(baseAddrs, func(a netip.Prefix) bool {
		return a.Addr().Is4() && !want.Contains(a.Addr())
	})
	if !taken {
		return base
	}
	sum := sha256.Sum256([]byte(want.Masked().String()))
	// Interface names are at most 15 bytes.
	prefix := base
	if len(prefix) > 10 {
		prefix = prefix[:10]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:4]
}

// InterfaceAddrs returns the addresses of the interface name, none when it
// does not exist.
func InterfaceAddrs(name string) ([]netip.Prefix, error) {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		var nerr *net.OpError
		if errors.As(err, &nerr) || strings.Contains(err.Error(), "no such network interface") {
			return nil, nil
		}
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", name, err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// HostIP returns the node's primary address: the source address of the
// default route, found without sending anything (a UDP "connect" only picks
// a route). Nodes with no default route fall back to loopback.
func HostIP() string {
	conn, err := net.Dial("udp4", "192.0.2.1:9") // TEST-NET-1: routed, never used
	if err != nil {
		return "127.0.0.1"
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String()
}
