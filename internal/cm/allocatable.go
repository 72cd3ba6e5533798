package cm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/internal/v1helper"
)

// ResourcePID is the kubelet's name for process IDs (pidlimit.PIDs), in
// kubeReserved / systemReserved and in berth's capacity. Like the kubelet,
// berth uses it for the kubepods cgroup only: it is not a Node resource.
const ResourcePID v1.ResourceName = "pid"

// The hard eviction signals whose thresholds the kubelet keeps out of
// allocatable (hardEvictionReservation); the others (inodes, imagefs, pid)
// watch nothing that capacity counts.
const (
	signalMemoryAvailable = "memory.available"
	signalNodeFsAvailable = "nodefs.available"
)

// Allocatable is what the node offers pods, the kubelet's Node.Status
// allocatable: for every resource of capacity, capacity minus kubeReserved
// minus systemReserved minus what the hard eviction thresholds keep free
// (evictionHard, signal → a quantity or a percentage of the capacity:
// memory.available off memory, nodefs.available off ephemeral-storage).
// A reservation larger than its capacity is an error naming the
// configuration fields, as the kubelet refuses to start on one. Then, as
// the kubelet's node status does, memory loses the capacity of every
// hugepages-<size> resource, stopping at 0: pre-allocated huge pages are
// memory no pod can ask for as memory.
func Allocatable(capacity, kubeReserved, systemReserved v1.ResourceList, evictionHard map[string]string) (v1.ResourceList, error) {
	eviction, err := hardEvictionReservation(evictionHard, capacity)
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
		if t, ok := eviction[name]; ok {
			add(t.field, t.value, t.written)
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
	subtractHugepages(out, capacity)
	return out, nil
}

// subtractHugepages takes the huge pages' capacity off allocatable memory.
// Unlike a reservation, huge pages beyond the memory left are not a
// configuration error (the kernel allocated them), so memory stops at 0.
func subtractHugepages(allocatable, capacity v1.ResourceList) {
	memory, ok := allocatable[v1.ResourceMemory]
	if !ok {
		return
	}
	for name, q := range capacity {
		if v1helper.IsHugePages(name) {
			memory.Sub(q)
		}
	}
	if memory.Sign() < 0 {
		memory.Set(0)
	}
	allocatable[v1.ResourceMemory] = memory
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

// evictionTerm is what one hard eviction threshold keeps out of a
// resource, with the field and value as configured for messages.
type evictionTerm struct {
	field, written string
	value          resource.Quantity
}

// hardEvictionReservation is what the memory.available and
// nodefs.available hard thresholds reserve, by the resource they come off.
// Other signals reserve nothing.
func hardEvictionReservation(evictionHard map[string]string, capacity v1.ResourceList) (map[v1.ResourceName]evictionTerm, error) {
	out := map[v1.ResourceName]evictionTerm{}
	var errs []error
	for _, s := range []struct {
		signal   string
		resource v1.ResourceName
	}{
		{signalMemoryAvailable, v1.ResourceMemory},
		{signalNodeFsAvailable, v1.ResourceEphemeralStorage},
	} {
		written, ok := evictionHard[s.signal]
		if !ok {
			continue
		}
		field := "evictionHard " + s.signal
		q, err := thresholdQuantity(field, written, capacity[s.resource])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if q != nil {
			out[s.resource] = evictionTerm{field: field, written: strings.TrimSpace(written), value: *q}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// thresholdQuantity parses a hard eviction threshold the way the kubelet
// does (ParseThresholdConfig, GetThresholdQuantity): a quantity, or a
// percentage of capacity parsed as a float32, which the kubelet's
// arithmetic rounds with. "0%", "100%" and "" mean no threshold: nil.
func thresholdQuantity(field, threshold string, capacity resource.Quantity) (*resource.Quantity, error) {
	threshold = strings.TrimSpace(threshold)
	if threshold == "" || threshold == "0%" || threshold == "100%" {
		return nil, nil
	}
	if number, ok := strings.CutSuffix(threshold, "%"); ok {
		p, err := strconv.ParseFloat(number, 32)
		if err != nil || p < 0 || p > 100 {
			return nil, fmt.Errorf("%s: %q: want a percentage between 0%% and 100%%", field, threshold)
		}
		fraction := float32(p) / 100
		return resource.NewQuantity(int64(float64(capacity.Value())*float64(fraction)), resource.BinarySI), nil
	}
	q, err := resource.ParseQuantity(threshold)
	if err != nil {
		return nil, fmt.Errorf("%s: %q: %w", field, threshold, err)
	}
	if q.Sign() < 0 {
		return nil, fmt.Errorf("%s: %q: must not be negative", field, threshold)
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
