package cnigc

import (
	"net/netip"
	"slices"
	"strings"
)

// Network is the one CNI network the collector may touch: berth's network
// name on this node's pod CIDR. Other berths on the same host (the
// end-to-end tests run many) use the same network name on other CIDRs, so
// the name alone does not make a rule this node's.
type Network struct {
	Name    string
	PodCIDR netip.Prefix
	// Earlier are the node's earlier pod CIDRs: pods started before a
	// podCIDR change keep their addresses on them.
	Earlier []netip.Prefix
}

// cidrs are all of the network's pod CIDRs that are set.
func (n Network) cidrs() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range append([]netip.Prefix{n.PodCIDR}, n.Earlier...) {
		if p.IsValid() {
			out = append(out, p)
		}
	}
	return out
}

// Lease is one address lease of host-local: a file named by the address
// whose first line is the container ID.
type Lease struct {
	IP string
	ID string
}

// Held is what the CNI state holds for one container ID.
type Held struct {
	ID string
	// Rules are the rules carrying the ID's comment outside its own chains
	// (the POSTROUTING jump, portmap's entry rule): deleted one by one.
	Rules []Rule
	// Chains are the ID's own chains that exist: flushed and deleted.
	Chains []string
	// Leases are the addresses host-local leased to the ID.
	Leases []string
	// Cache are libcni's cached results of the ID's attachments (its
	// loopback's too), by path.
	Cache []string
	// NetNS are the named network namespaces those results name that
	// still exist: containerd removes a sandbox's only when it tears the
	// sandbox down.
	NetNS []string
}

// Empty reports whether nothing is held.
func (h *Held) Empty() bool {
	return len(h.Rules) == 0 && len(h.Chains) == 0 && len(h.Leases) == 0 && len(h.Cache) == 0 && len(h.NetNS) == 0
}

// Holdings returns what the nat table and the leases hold for each
// container ID of net. A rule counts only if its comment names net and
// every pod address in the ID's rules lies in net's pod CIDR (at least one
// must): a rule with berth's name for an address of another node, or of
// another network, is never the collector's. Leases come from this node's
// own IPAM dir, so they are all its own.
func Holdings(nat NAT, leases []Lease, net Network) map[string]*Held {
	ix := IndexRules(nat, net.Name)
	out := map[string]*Held{}
	for id := range ix.byID {
		h := ix.Held(id)
		// The rules in the ID's own chains carry pod addresses too.
		scope := slices.Clone(h.Rules)
		for _, c := range h.Chains {
			scope = append(scope, ix.byChain[c]...)
		}
		if inScope(scope, net.cidrs()) {
			out[id] = h
		}
	}
	for _, l := range leases {
		if out[l.ID] == nil {
			out[l.ID] = &Held{ID: l.ID}
		}
		out[l.ID].Leases = append(out[l.ID].Leases, l.IP)
	}
	return out
}

// RuleIndex is a nat table's rules by the container ID their comment names
// on one network, and by chain. Each rule's comment is read once: looking
// through the whole table for each ID read it once per ID, and at 500
// pods (some 2,000 rules) one collection pass took two seconds of CPU.
type RuleIndex struct {
	network string
	chains  map[string]bool
	byID    map[string][]Rule // in the table's order
	byChain map[string][]Rule
}

// IndexRules indexes nat's rules for network.
func IndexRules(nat NAT, network string) *RuleIndex {
	ix := &RuleIndex{network: network, chains: nat.Chains, byID: map[string][]Rule{}, byChain: map[string][]Rule{}}
	for _, r := range nat.Rules {
		ix.byChain[r.Chain] = append(ix.byChain[r.Chain], r)
		if name, id, ok := OwnerOf(r.Comment()); ok && name == network {
			ix.byID[id] = append(ix.byID[id], r)
		}
	}
	return ix
}

// Held returns what the nat table holds for container id: the rules
// outside id's own chains whose comment names it, in the table's order,
// and its own chains that exist. It does not look at addresses: a caller
// that has not made the ID its own by other means checks them.
func (ix *RuleIndex) Held(id string) *Held {
	h := &Held{ID: id}
	own := []string{MasqChain(ix.network, id), DNATChain(ix.network, id)}
	for _, r := range ix.byID[id] {
		if !slices.Contains(own, r.Chain) {
			h.Rules = append(h.Rules, r)
		}
	}
	for _, c := range own {
		if ix.chains[c] {
			h.Chains = append(h.Chains, c)
		}
	}
	return h
}

// inScope reports whether the pod addresses the rules name all lie in one
// of cidrs, and there is one at least. A pod address is a source (the masquerade
// jump's -s, portmap's hairpin -s), a DNAT destination, or the subnet of
// the masquerade chain's ACCEPT (-d with a prefix shorter than a host's).
// Negated matches (! -d 224.0.0.0/4), loopback (portmap's -s 127.0.0.1)
// and host addresses after -d (portmap's hostIP) are not pod addresses.
func inScope(rules []Rule, cidrs []netip.Prefix) bool {
	found := false
	for _, r := range rules {
		for i := 0; i+1 < len(r.Args); i++ {
			if i > 0 && r.Args[i-1] == "!" {
				continue
			}
			v := r.Args[i+1]
			var ok, counts bool
			switch r.Args[i] {
			case "-s", "--source":
				p, err := parsePrefix(v)
				counts = err == nil && !p.Addr().IsLoopback()
				ok = counts && slices.ContainsFunc(cidrs, func(c netip.Prefix) bool { return p.Bits() >= c.Bits() && c.Contains(p.Addr()) })
			case "-d", "--destination":
				p, err := parsePrefix(v)
				counts = err == nil && p.Bits() < p.Addr().BitLen()
				ok = counts && slices.ContainsFunc(cidrs, func(c netip.Prefix) bool { return p.Masked() == c.Masked() })
			case "--to-destination":
				a, err := destinationAddr(v)
				counts = true
				ok = err == nil && slices.ContainsFunc(cidrs, func(c netip.Prefix) bool { return c.Contains(a) })
			}
			if counts && !ok {
				return false
			}
			found = found || counts
		}
	}
	return found
}

// parsePrefix reads an address with or without a prefix length.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// destinationAddr reads the address of a DNAT --to-destination: addr,
// addr:port or [addr]:port, a port range allowed.
func destinationAddr(s string) (netip.Addr, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return netip.ParseAddr(s) // the error names s
		}
		return netip.ParseAddr(s[1:end])
	}
	if host, _, ok := strings.Cut(s, ":"); ok && strings.Count(s, ":") == 1 {
		s = host
	}
	return netip.ParseAddr(s)
}
