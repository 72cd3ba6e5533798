package reset

import (
	"github.com/berth-dev/berth/internal/cnigc"
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
	for _, id := range sandboxIDs {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		if h := cnigc.HeldIn(nat, network, id); !h.Empty() {
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
