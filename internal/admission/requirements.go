package admission

import (
	"fmt"
	"math"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Requirement is an amount of one resource a critical pod lacks (the
// kubelet's admissionRequirement), in the kubelet's units.
type Requirement struct {
	Resource v1.ResourceName `json:"resource"`
	Quantity int64           `json:"quantity"`
}

// Requirements is what preemption must free, one entry per resource.
type Requirements []Requirement

// requirementsOf turns the resource reasons of a failed admission into
// what preemption must free: each shortfall.
func requirementsOf(insufficient []InsufficientResource) Requirements {
	out := make(Requirements, 0, len(insufficient))
	for _, r := range insufficient {
		out = append(out, Requirement{Resource: r.Resource, Quantity: r.Shortfall()})
	}
	return out
}

// subtract is what would remain of the requirements if pods were evicted;
// met requirements are dropped.
func (rs Requirements) subtract(pods ...*PodInfo) Requirements {
	var out Requirements
	for _, r := range rs {
		left := r.Quantity
		for _, p := range pods {
			left -= p.Request(r.Resource)
			if left <= 0 {
				break
			}
		}
		if left > 0 {
			out = append(out, Requirement{Resource: r.Resource, Quantity: left})
		}
	}
	return out
}

// distance is how far evicting pod alone leaves the requirements from
// met: the sum, over the requirements it does not meet, of the square of
// the fraction still missing. Every requirement weighs the same, whatever
// its magnitude; a pod meeting them all is at 0.
func (rs Requirements) distance(pod *PodInfo) float64 {
	var d float64
	for _, r := range rs {
		if left := float64(r.Quantity - pod.Request(r.Resource)); left > 0 {
			d += math.Pow(left/float64(r.Quantity), 2)
		}
	}
	return d
}

// String is the kubelet's form, "[(res: cpu, q: 500), ]", which its
// messages carry.
func (rs Requirements) String() string {
	var b strings.Builder
	b.WriteString("[")
	for _, r := range rs {
		fmt.Fprintf(&b, "(res: %s, q: %d), ", r.Resource, r.Quantity)
	}
	b.WriteString("]")
	return b.String()
}

// smallerResourceRequest reports whether a asks for less than b, memory
// first, then cpu. Equal requests count as smaller, as the kubelet's do:
// among pods alike in every respect, the later one is chosen.
func smallerResourceRequest(a, b *PodInfo) bool {
	for _, name := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		ra, rb := a.Request(name), b.Request(name)
		if ra < rb {
			return true
		}
		if ra > rb {
			return false
		}
	}
	return true
}
