package chaos

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// KindUnifiedLeak is a pod cgroup left in a hybrid host's unified
// hierarchy: every deleted pod leaves one today, faults or not.
const KindUnifiedLeak = "leak-unified"

// KindNATLeak is a CNI nat rule of a pod left after the pod was deleted
// (issue #19, item 9).
const KindNATLeak = "leak-nat"

// Leftovers is what remained of the node once every pod was deleted and
// berth and its containerd were stopped: each entry is a leak.
type Leftovers struct {
	Processes  []string // command lines still running from the node's root dir
	PodCgroups []string // pod cgroups under the node's cgroup root, in a controller's hierarchy
	// UnifiedCgroups are pod cgroups left in the controller-less cgroup2
	// hierarchy of a hybrid host (/sys/fs/cgroup/unified), which runc
	// fills and berth never names.
	UnifiedCgroups []string
	Mounts         []string // mount points under the node's root dir
	Veths          []string // interfaces still enslaved to the node's bridge
	Netns          []string // network namespaces of the node's sandboxes still present
	NAT            []string // iptables nat rules naming an address of the pod CIDR
	// CNICache are libcni's cached results of the node's sandboxes, which
	// the managed containerd writes outside the root dir.
	CNICache []string
}

// Violations turns each leftover into a leak violation.
func (l Leftovers) Violations() []Violation {
	var out []Violation
	add := func(what string, items []string) {
		for _, it := range items {
			out = append(out, Violation{Kind: "leak", Detail: what + " " + it})
		}
	}
	add("process", l.Processes)
	add("pod cgroup", l.PodCgroups)
	if n := len(l.UnifiedCgroups); n > 0 {
		// One per deleted pod: one line says it.
		out = append(out, Violation{Kind: KindUnifiedLeak,
			Detail: fmt.Sprintf("%d pod cgroups, e.g. %s", n, l.UnifiedCgroups[0])})
	}
	add("mount", l.Mounts)
	add("veth", l.Veths)
	add("netns", l.Netns)
	add("cached CNI result", l.CNICache)
	for _, it := range l.NAT {
		out = append(out, Violation{Kind: KindNATLeak, Detail: "nat rule " + it})
	}
	return out
}

// MountsUnder returns the mount points of a /proc/self/mountinfo text that
// are at or below dir.
func MountsUnder(mountinfo, dir string) []string {
	dir = strings.TrimSuffix(dir, "/")
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline and
// backslash.
func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// EnslavedTo returns the interfaces of an `ip -o link show` text whose
// master is bridge.
func EnslavedTo(ipLink, bridge string) []string {
	var out []string
	for _, line := range strings.Split(ipLink, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "master" && f[i+1] == bridge && len(f) > 1 {
				out = append(out, strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"))
				break
			}
		}
	}
	return out
}

// NATRulesFor returns the rules of an `iptables-save -t nat` text whose
// source or destination is inside cidr: the CNI bridge plugin's masquerade
// chains of pods, which must go with their pods.
func NATRulesFor(save string, cidr netip.Prefix) []string {
	var out []string
	for _, line := range strings.Split(save, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "-s" && f[i] != "-d" {
				continue
			}
			addr := f[i+1]
			if p, err := netip.ParsePrefix(addr); err == nil {
				if p.Bits() >= cidr.Bits() && cidr.Contains(p.Addr()) {
					out = append(out, line)
					break
				}
			} else if a, err := netip.ParseAddr(addr); err == nil && cidr.Contains(a) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// DevicesFromInfo returns the value of env in a CRI ContainerStatus's
// verbose "info" (containerd's JSON, whose "config" is the container's CRI
// config), split at commas: the devices the container was given.
func DevicesFromInfo(info, env string) ([]string, error) {
	var doc struct {
		Config struct {
			Envs []struct {
				Key   string `json:"key"`
				Value string `json:"value"`
			} `json:"envs"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(info), &doc); err != nil {
		return nil, fmt.Errorf("container info: %w", err)
	}
	for _, e := range doc.Config.Envs {
		if e.Key == env && e.Value != "" {
			return strings.Split(e.Value, ","), nil
		}
	}
	return nil, nil
}

// NetnsFromInfo returns the network namespace path in a CRI
// PodSandboxStatus's verbose "info" (containerd's JSON: the sandbox's OCI
// runtime spec), or "" for a sandbox on the host network.
func NetnsFromInfo(info string) (string, error) {
	var doc struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct {
					Type string `json:"type"`
					Path string `json:"path"`
				} `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(info), &doc); err != nil {
		return "", fmt.Errorf("sandbox info: %w", err)
	}
	for _, ns := range doc.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			return ns.Path, nil
		}
	}
	return "", nil
}
