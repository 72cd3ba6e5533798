package cm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourcePID is the kubelet's name for process IDs (pidlimit.PIDs), in
// kubeReserved / systemReserved and in berth's capacity. Like the kubelet,
// berth uses it for the kubepods cgroup only: it is not a Node resource.
const ResourcePID v1.ResourceName = "pid"

// evictionMemoryAvailable names the hard eviction threshold in messages.
const evictionMemoryAvailable = "evictionHard memory.available"

// Allocatable is what the node offers pods, the kubelet's Node.Status
// allocatable: for every resource of capacity, capacity minus kubeReserved
// minus systemReserved, and for memory minus the hard eviction threshold
// evictionHardMemory (memory.available: a quantity, or a percentage of the
// memory capacity; "" for none). A reservation larger than its capacity is
// an error naming the configuration fields, as the kubelet refuses to start
// on one.
func Allocatable(capacity, kubeReserved, systemReserved v1.ResourceList, evictionHardMemory string) (v1.ResourceList, error) {
	eviction, err := evictionReservation(evictionHardMemory, capacity[v1.ResourceMemory])
	if err != nil {
		return nil, err
	}
	out := make(v1.ResourceList, len(capacity))
	var errs []error
	for _, name := range sortedNames(capacity) {
		var total resource.Quantity
		var terms []string
		add := func(field string, q resource.Quantity, written string) {
			if !q.IsZero() {
				total.Add(q)
				terms = append(terms, fmt.Sprintf("%s (%s)", field, written))
			}
		}
		if q, ok := kubeReserved[name]; ok {
			add("kubeReserved."+string(name), q, q.String())
		}
		if q, ok := systemReserved[name]; ok {
			add("systemReserved."+string(name), q, q.String())
		}
		if name == v1.ResourceMemory && eviction != nil {
			add(evictionMemoryAvailable, *eviction, strings.TrimSpace(evictionHardMemory))
		}
		value := capacity[name].DeepCopy()
		value.Sub(total)
		if value.Sign() < 0 {
			verb := "exceeds"
			if len(terms) > 1 {
				verb = "exceed"
			}
			c := capacity[name]
			errs = append(errs, fmt.Errorf("%s %s the node's %s capacity (%s)", strings.Join(terms, " + "), verb, name, c.String()))
			continue
		}
		out[name] = value
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// NodeAllocatableAbsolute is what the node's cgroups enforce, the kubelet's
// GetNodeAllocatableAbsolute: capacity minus kubeReserved and
// systemReserved, never below 0. Unlike Allocatable it keeps the hard
// eviction threshold, which eviction, not the OOM killer, defends.
func NodeAllocatableAbsolute(capacity, kubeReserved, systemReserved v1.ResourceList) v1.ResourceList {
	out := make(v1.ResourceList, len(capacity))
	for name, c := range capacity {
		value := c.DeepCopy()
		value.Sub(systemReserved[name])
		value.Sub(kubeReserved[name])
		if value.Sign() < 0 {
			value.Set(0)
		}
		out[name] = value
	}
	return out
}

// evictionReservation parses the memory.available hard eviction threshold
// the way the kubelet does (ParseThresholdConfig, GetThresholdQuantity): a
// quantity, or a percentage of memoryCapacity parsed as a float32, which
// the kubelet's arithmetic rounds with. "0%" and "100%" mean no threshold;
// nil means none.
func evictionReservation(threshold string, memoryCapacity resource.Quantity) (*resource.Quantity, error) {
	threshold = strings.TrimSpace(threshold)
	if threshold == "" || threshold == "0%" || threshold == "100%" {
		return nil, nil
	}
	if number, ok := strings.CutSuffix(threshold, "%"); ok {
		p, err := strconv.ParseFloat(number, 32)
		if err != nil || p < 0 || p > 100 {
			return nil, fmt.Errorf("%s: %q: want a percentage between 0%% and 100%%", evictionMemoryAvailable, threshold)
		}
		fraction := float32(p) / 100
		return resource.NewQuantity(int64(float64(memoryCapacity.Value())*float64(fraction)), resource.BinarySI), nil
	}
	q, err := resource.ParseQuantity(threshold)
	if err != nil {
		return nil, fmt.Errorf("%s: %q: %w", evictionMemoryAvailable, threshold, err)
	}
	if q.Sign() < 0 {
		return nil, fmt.Errorf("%s: %q: must not be negative", evictionMemoryAvailable, threshold)
	}
	return &q, nil
}

func sortedNames(l v1.ResourceList) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
