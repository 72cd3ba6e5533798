package reset

import (
	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/network"
)

// SelectRules picks what the nat table holds for berth's sandboxes on CNI
// network `network`, one Held per sandbox that holds anything: the rules
// whose comment names the sandbox (the bridge and portmap plugins write
// `name: "<network>" id: "<sandbox>"`), which go one by one, and the
// chains the plugins made for that sandbox alone, which go whole. The
// chains every network shares (CNI-HOSTPORT-*) stay. Another berth on the
// host uses the same network name, so the sandbox id is what makes a rule
// this berth's.
func SelectRules(nat cnigc.NAT, network string, sandboxIDs []string) []*cnigc.Held {
	var out []*cnigc.Held
	seen := map[string]bool{}
	ix := cnigc.IndexRules(nat, network)
	for _, id := range sandboxIDs {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		if h := ix.Held(id); !h.Empty() {
			out = append(out, h)
		}
	}
	return out
}

// ruleCount is how many rules and chains held go.
func ruleCount(held []*cnigc.Held) int {
	n := 0
	for _, h := range held {
		n += len(h.Rules) + len(h.Chains)
	}
	return n
}

// MasqueradeJumps are, for each pod CIDR whose masquerade chain berth made
// (network.MasqueradeScript, with --cluster-cidr), the POSTROUTING rules
// jumping to it, as iptables-save prints them; a CIDR whose chain is not
// in the table is left out. The chain is named after the CIDR alone, so
// only a CIDR this berth used (its conflist's) ties a chain to it.
func MasqueradeJumps(nat cnigc.NAT, podCIDRs []string) map[string][]string {
	out := map[string][]string{}
	for _, cidr := range podCIDRs {
		chain := network.MasqChain(cidr)
		if !nat.Chains[chain] {
			continue
		}
		out[cidr] = nil
		for _, r := range nat.Rules {
			if r.Chain == "POSTROUTING" && r.Jump() == chain {
				out[cidr] = append(out[cidr], r.Line)
			}
		}
	}
	return out
}
