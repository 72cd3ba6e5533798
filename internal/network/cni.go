// Package network sets up the pod network berth gives its managed runtime:
// one CNI bridge with host-local IPAM on the pod CIDR, port mappings for
// hostPort, and the node's own address.
package network

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"

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

// BridgeFor returns the Linux bridge of cidr: base for the configured pod
// CIDR (the one --cni-bridge names), and for any other a name derived from
// base and cidr. A podCIDR that changes while pods run gets a bridge of its
// own: the bridge plugin gives a bridge one IPv4 gateway address, so the
// old pods keep their bridge, gateway and addresses, and the new ones get
// the new range on the new bridge.
func BridgeFor(base, configured, cidr string) string {
	if cidr == configured {
		return base
	}
	sum := sha256.Sum256([]byte(cidr))
	// Interface names are at most 15 bytes.
	prefix := base
	if len(prefix) > 10 {
		prefix = prefix[:10]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:4]
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
