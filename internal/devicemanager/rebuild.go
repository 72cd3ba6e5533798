package devicemanager

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
)

// ContainerLister lists the runtime's containers, whatever their state
// (a nil filter lists all): the runtime.Service of berth.
type ContainerLister interface {
	ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// rebuildTimeout bounds listing the runtime's containers at start-up.
const rebuildTimeout = time.Minute

// rebuildFromContainers returns the allocations that the runtime's
// containers record in AnnotationDevices: for each pod and container name,
// those of its newest container with a readable annotation (an earlier
// attempt of a restarted container holds the same devices). Entries come
// sorted by pod, container and resource, without NUMA nodes (the annotation
// has none) and without the plugin's Allocate response, which is asked for
// again when the container is next created.
//
// A container berth did not create, or created without devices, is skipped
// in silence; one whose annotation or labels are unreadable is skipped and
// reported in problems, which also name every device two pods claim. Both
// claims are kept: a device one container may still use is not handed out
// until the pods that are gone are freed.
func rebuildFromContainers(cs []*runtimeapi.Container) (entries []checkpoint.PodDevicesEntry, problems []string) {
	// Newest first, so the first readable container of a name wins.
	sorted := slices.Clone(cs)
	slices.SortStableFunc(sorted, func(a, b *runtimeapi.Container) int {
		return cmp.Or(cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt()), strings.Compare(a.GetId(), b.GetId()))
	})
	type key struct{ pod, container string }
	seen := map[key]bool{}
	for _, c := range sorted {
		value, ok := c.GetAnnotations()[AnnotationDevices]
		if !ok || c.GetLabels()[container.LabelManagedBy] != "true" {
			continue
		}
		uid, name := c.GetLabels()[container.LabelPodUID], c.GetLabels()[container.LabelContainerName]
		if uid == "" || name == "" {
			problems = append(problems, fmt.Sprintf("container %s: annotation %s: no pod UID or container name label; skipped",
				c.GetId(), AnnotationDevices))
			continue
		}
		k := key{uid, name}
		if seen[k] {
			continue
		}
		devices, err := parseDevicesAnnotation(value)
		if err != nil {
			problems = append(problems, fmt.Sprintf("container %s (pod %s, container %s): annotation %s: %v; skipped",
				c.GetId(), uid, name, AnnotationDevices, err))
			continue
		}
		seen[k] = true
		for _, resource := range sortedKeys(devices) {
			entries = append(entries, checkpoint.PodDevicesEntry{
				PodUID: uid, ContainerName: name, ResourceName: resource,
				DeviceIDs: checkpoint.DevicesPerNUMA{nodeWithoutTopology: devices[resource]},
			})
		}
	}
	slices.SortFunc(entries, func(a, b checkpoint.PodDevicesEntry) int {
		return cmp.Or(strings.Compare(a.PodUID, b.PodUID), strings.Compare(a.ContainerName, b.ContainerName),
			strings.Compare(a.ResourceName, b.ResourceName))
	})
	return entries, append(problems, sharedDevices(entries)...)
}

// sharedDevices names each device that containers of more than one pod
// claim. Containers of one pod may share a device: an init container hands
// its devices on to the containers after it.
func sharedDevices(entries []checkpoint.PodDevicesEntry) []string {
	type device struct{ resource, id string }
	owners := map[device][]string{}
	for _, e := range entries {
		for _, id := range e.DeviceIDs[nodeWithoutTopology] {
			d := device{e.ResourceName, id}
			if !slices.Contains(owners[d], e.PodUID) {
				owners[d] = append(owners[d], e.PodUID)
			}
		}
	}
	var out []string
	for d, pods := range owners {
		if len(pods) > 1 {
			out = append(out, fmt.Sprintf("device %s of %s is recorded for pods %s; neither is given it again until one is gone",
				d.id, d.resource, strings.Join(pods, ", ")))
		}
	}
	slices.Sort(out)
	return out
}

// reconcile merges the allocations the checkpoint records (saved) with
// those the runtime's containers record (running), and says what it
// corrected. A container's record wins: it holds the devices it was created
// with, whatever an older or damaged checkpoint says. The checkpoint's entry
// is kept where they agree, for the plugin's response the container record
// lacks, and where the runtime has no record (a pod admitted whose container
// is not created yet, or one that is gone, which the next admission frees).
// Entries come sorted by pod, container and resource.
func reconcile(saved, running []checkpoint.PodDevicesEntry) (merged []checkpoint.PodDevicesEntry, corrected []string) {
	type key struct{ pod, container, resource string }
	keyOf := func(e checkpoint.PodDevicesEntry) key { return key{e.PodUID, e.ContainerName, e.ResourceName} }
	byKey := map[key]checkpoint.PodDevicesEntry{}
	for _, e := range saved {
		byKey[keyOf(e)] = e
	}
	for _, r := range running {
		k := keyOf(r)
		s, ok := byKey[k]
		switch {
		case !ok:
			corrected = append(corrected, fmt.Sprintf("pod %s container %s: %s %v is not in the checkpoint; taken from its container (freed again if its pod is gone)",
				k.pod, k.container, k.resource, sets.List(flatten(r.DeviceIDs))))
		case !flatten(s.DeviceIDs).Equal(flatten(r.DeviceIDs)):
			corrected = append(corrected, fmt.Sprintf("pod %s container %s: %s is %v in the checkpoint but %v in its container; the container's kept",
				k.pod, k.container, k.resource, sets.List(flatten(s.DeviceIDs)), sets.List(flatten(r.DeviceIDs))))
		default:
			continue
		}
		byKey[k] = r
	}
	inRuntime := map[key]bool{}
	for _, r := range running {
		inRuntime[keyOf(r)] = true
	}
	keys := slices.SortedFunc(maps.Keys(byKey), func(a, b key) int {
		return cmp.Or(strings.Compare(a.pod, b.pod), strings.Compare(a.container, b.container), strings.Compare(a.resource, b.resource))
	})
	for _, k := range keys {
		e := byKey[k]
		if inRuntime[k] {
			merged = append(merged, e)
			continue
		}
		kept, dropped := withoutDevicesOfOthers(e, running)
		if len(dropped) > 0 {
			corrected = append(corrected, fmt.Sprintf("pod %s container %s: %s %v in the checkpoint are held by another pod's container; dropped",
				k.pod, k.container, k.resource, dropped))
		}
		if len(flatten(kept.DeviceIDs)) > 0 {
			merged = append(merged, kept)
		}
	}
	return merged, corrected
}

// withoutDevicesOfOthers returns a checkpoint entry that no container
// backs, less the devices that containers of other pods record: those
// containers run with them, so the checkpoint's claim (a pod gone, or one
// whose container is not created yet) is the stale one. Kept, it would book
// one device for two pods until the pod that is gone was freed. Within a
// pod, containers may share a device (an init container hands its devices
// on).
func withoutDevicesOfOthers(e checkpoint.PodDevicesEntry, running []checkpoint.PodDevicesEntry) (checkpoint.PodDevicesEntry, []string) {
	held := sets.New[string]()
	for _, r := range running {
		if r.PodUID != e.PodUID && r.ResourceName == e.ResourceName {
			held = held.Union(flatten(r.DeviceIDs))
		}
	}
	if !flatten(e.DeviceIDs).HasAny(sets.List(held)...) {
		return e, nil
	}
	kept := e
	kept.DeviceIDs = checkpoint.DevicesPerNUMA{}
	var dropped []string
	for node, ids := range e.DeviceIDs {
		for _, id := range ids {
			if held.Has(id) {
				dropped = append(dropped, id)
				continue
			}
			kept.DeviceIDs[node] = append(kept.DeviceIDs[node], id)
		}
	}
	slices.Sort(dropped)
	return kept, dropped
}

// runningAllocations lists the allocations the runtime's containers record,
// logging what it could not read. Without a runtime (a test) there are none.
func (m *Manager) runningAllocations(ctx context.Context) ([]checkpoint.PodDevicesEntry, error) {
	if m.runtime == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, rebuildTimeout)
	defer cancel()
	cs, err := m.runtime.ListContainers(ctx, nil)
	if err != nil {
		// Going on would hand out devices that running containers hold.
		return nil, fmt.Errorf("listing the runtime's containers to check the device allocations: %w", err)
	}
	entries, problems := rebuildFromContainers(cs)
	for _, p := range problems {
		m.log.Warn("reading device allocations from the runtime", "problem", p)
	}
	return entries, nil
}
