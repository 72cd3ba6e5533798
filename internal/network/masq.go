package network

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// masqPrefix names berth's masquerade chains in the nat table.
const masqPrefix = "BERTH-MASQ-"

// MasqChain is the nat chain berth masquerades podCIDR's traffic in: one
// per pod CIDR, so that the berths of one machine (one per CIDR) never
// share one.
func MasqChain(podCIDR string) string {
	sum := sha256.Sum256([]byte(podCIDR))
	return masqPrefix + hex.EncodeToString(sum[:])[:12]
}

// MasqComment is the comment on the POSTROUTING jump to podCIDR's chain.
func MasqComment(podCIDR string) string { return "berth masquerade for " + podCIDR }

// MasqueradeScript is the iptables-restore input (run with --noflush) that
// makes podCIDR's chain masquerade what the pods send outside the cluster:
// traffic to any pod of the cluster CIDR (the node's own and the other
// nodes'), and multicast, keeps its source address, as the Kubernetes
// network model asks (no NAT between pods); the rest leaves with the
// host's address, as the bridge plugin's ipMasq would. Declaring the chain
// flushes it, so the script sets the rules afresh however often it runs;
// the POSTROUTING jump is added only when hasJump says it is missing.
// This is the kubelet's former --non-masquerade-cidr (kubenet), in a chain
// that berth owns.
func MasqueradeScript(podCIDR, clusterCIDR string, hasJump bool) string {
	chain := MasqChain(podCIDR)
	var b strings.Builder
	b.WriteString("*nat\n")
	fmt.Fprintf(&b, ":%s - [0:0]\n", chain)
	fmt.Fprintf(&b, "-A %s -d %s -j RETURN\n", chain, podCIDR)
	fmt.Fprintf(&b, "-A %s -d %s -j RETURN\n", chain, clusterCIDR)
	fmt.Fprintf(&b, "-A %s -d 224.0.0.0/4 -j RETURN\n", chain)
	fmt.Fprintf(&b, "-A %s -j MASQUERADE\n", chain)
	if !hasJump {
		fmt.Fprintf(&b, "-A POSTROUTING -s %s -m comment --comment %q -j %s\n", podCIDR, MasqComment(podCIDR), chain)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// UnmasqueradeScript removes podCIDR's chain and the given POSTROUTING
// jump lines to it (as iptables-save prints them, "-A POSTROUTING ...").
func UnmasqueradeScript(podCIDR string, jumps []string) string {
	chain := MasqChain(podCIDR)
	var b strings.Builder
	b.WriteString("*nat\n")
	for _, j := range jumps {
		b.WriteString("-D " + strings.TrimPrefix(j, "-A ") + "\n")
	}
	fmt.Fprintf(&b, "-F %s\n-X %s\nCOMMIT\n", chain, chain)
	return b.String()
}
