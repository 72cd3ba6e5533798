package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/berth-dev/berth/internal/eviction"
	"github.com/berth-dev/berth/internal/v1helper"
)

// describeNodeCmd writes the node: its conditions, capacity and
// allocatable, its pods and what they take of it, the eviction thresholds
// with what was last observed of them, and the node's events.
func describeNodeCmd(ctx context.Context, out io.Writer, client *apiClient, now time.Time, pal palette) error {
	var node v1.Node
	if err := client.getJSON(ctx, "/node", "the node", &node); err != nil {
		return err
	}
	pods, err := client.pods(ctx)
	if err != nil {
		return err
	}
	var ev eviction.Status
	if err := client.getJSON(ctx, "/node/eviction", "the eviction state", &ev); err != nil {
		return err
	}
	var events v1.EventList
	if err := client.getJSON(ctx, "/node/events", "the node's events", &events); err != nil {
		return err
	}
	_, err = io.WriteString(out, pal.description(describeNode(&node, pods.Items, ev, events.Items, now)))
	return err
}

func describeNode(node *v1.Node, pods []v1.Pod, ev eviction.Status, events []v1.Event, now time.Time) string {
	var b strings.Builder
	w := newDescribeWriter(&b)
	w.write(0, "Name:\t%s\n", node.Name)
	w.write(0, "Conditions:\n")
	w.write(1, "Type\tStatus\tLastTransitionTime\tReason\tMessage\n")
	w.write(1, "----\t------\t------------------\t------\t-------\n")
	for _, c := range node.Status.Conditions {
		w.write(1, "%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, formatTime(c.LastTransitionTime), c.Reason, c.Message)
	}
	writeResourceList(w, "Capacity", node.Status.Capacity)
	writeResourceList(w, "Allocatable", node.Status.Allocatable)
	writeNodePods(w, node, pods, now)
	w.write(0, "Eviction:\n")
	if ev.Error != "" {
		w.write(1, "Last observation failed:\t%s\n", ev.Error)
	}
	if !ev.LastSync.IsZero() {
		w.write(1, "Last observed:\t%s ago\n", since(ev.LastSync, now))
	}
	w.write(1, "SIGNAL\tTHRESHOLD\tGRACE\tAVAILABLE\tCAPACITY\tSTATE\n")
	for _, t := range ev.Thresholds {
		threshold := t.Value
		if t.Quantity != "" && t.Quantity != t.Value {
			threshold += " (" + t.Quantity + ")"
		}
		grace := "hard"
		if t.GracePeriod.Duration > 0 {
			grace = t.GracePeriod.Duration.String()
		}
		w.write(1, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Signal, threshold, grace, orUnknown(t.Available), orUnknown(t.Capacity), thresholdState(t, now))
	}
	if e := ev.LastEviction; e != nil {
		w.write(1, "Last eviction:\t%s/%s, %s ago: %s\n", e.Namespace, e.Name, since(e.Time, now), e.Message)
	}
	w.flush()
	w.write(0, "\n")
	writeEvents(w, events, now)
	w.flush()
	return b.String()
}

func thresholdState(t eviction.ThresholdStatus, now time.Time) string {
	switch {
	case t.Enforced:
		return fmt.Sprintf("met for %s, evicting", since(t.MetSince, now))
	case t.Met:
		return fmt.Sprintf("met for %s, in grace period", since(t.MetSince, now))
	}
	return "not met"
}

func writeResourceList(w *describeWriter, title string, l v1.ResourceList) {
	w.write(0, "%s:\n", title)
	names := make([]string, 0, len(l))
	for name := range l {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		q := l[v1.ResourceName(name)]
		w.write(1, "%s:\t%s\n", name, q.String())
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// podResources is a pod with what it requests and limits, summed over its
// containers as the scheduler sums them.
type podResources struct {
	pod              *v1.Pod
	requests, limits v1.ResourceList
}

// nonTerminatedPods are the pods holding a share of the node, by namespace
// and name. A pending pod holds its share already: it was admitted on
// that basis, as kubectl counts it.
func nonTerminatedPods(pods []v1.Pod) []podResources {
	var out []podResources
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		out = append(out, podResources{
			pod:      p,
			requests: resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}),
			limits:   resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{}),
		})
	}
	slices.SortFunc(out, func(a, b podResources) int {
		return cmp.Or(strings.Compare(a.pod.Namespace, b.pod.Namespace), strings.Compare(a.pod.Name, b.pod.Name))
	})
	return out
}

// writeNodePods writes kubectl's Non-terminated Pods and Allocated
// resources tables: each pod's cpu and memory, and the sum of every
// resource the node lists or a pod asks for, with their shares of
// allocatable.
func writeNodePods(w *describeWriter, node *v1.Node, pods []v1.Pod, now time.Time) {
	allocatable := node.Status.Allocatable
	if len(allocatable) == 0 {
		// A node that has not worked out its allocatable yet offers
		// all it has, as kubectl reckons.
		allocatable = node.Status.Capacity
	}
	held := nonTerminatedPods(pods)
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	w.flush()
	w.write(0, "Non-terminated Pods:\t(%d in total)\n", len(held))
	w.write(1, "Namespace\tName\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n")
	w.write(1, "---------\t----\t------------\t----------\t---------------\t-------------\t---\n")
	for _, p := range held {
		created := p.pod.CreationTimestamp.Time
		if created.IsZero() && p.pod.Status.StartTime != nil {
			created = p.pod.Status.StartTime.Time
		}
		w.write(1, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.pod.Namespace, p.pod.Name,
			shareOf(v1.ResourceCPU, p.requests, allocatable), shareOf(v1.ResourceCPU, p.limits, allocatable),
			shareOf(v1.ResourceMemory, p.requests, allocatable), shareOf(v1.ResourceMemory, p.limits, allocatable),
			since(created, now))
		addResources(requests, p.requests)
		addResources(limits, p.limits)
	}
	w.flush()
	w.write(0, "Allocated resources:\n")
	w.write(1, "(Total limits may be over 100 percent, i.e., overcommitted.)\n")
	w.write(1, "Resource\tRequests\tLimits\n")
	w.write(1, "--------\t--------\t------\n")
	for _, name := range allocatedResources(allocatable, requests, limits) {
		w.write(1, "%s\t%s\t%s\n", name, shareOf(name, requests, allocatable), shareOf(name, limits, allocatable))
	}
	w.flush()
}

func addResources(sum, l v1.ResourceList) {
	for name, q := range l {
		total := sum[name]
		total.Add(q)
		sum[name] = total
	}
}

// allocatedResources are the rows of Allocated resources: cpu, memory and
// ephemeral-storage always, then every hugepages size and every extended
// resource that the node lists or a pod asks for.
func allocatedResources(lists ...v1.ResourceList) []v1.ResourceName {
	names := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}
	for _, l := range lists {
		for name := range l {
			if (v1helper.IsHugePages(name) || v1helper.IsExtendedResourceName(name)) && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	// Hugepages first, as kubectl shows them; each kind by name.
	kind := func(n v1.ResourceName) int {
		if v1helper.IsHugePages(n) {
			return 0
		}
		return 1
	}
	slices.SortFunc(names[3:], func(a, b v1.ResourceName) int {
		return cmp.Or(cmp.Compare(kind(a), kind(b)), strings.Compare(string(a), string(b)))
	})
	return names
}

// shareOf is l's amount of name with its share of allocatable, cut to a
// whole percent as kubectl does: "100m (5%)". A resource the node has none
// of shows no share; there is nothing for it to be a share of.
func shareOf(name v1.ResourceName, l, allocatable v1.ResourceList) string {
	q := l[name]
	a, ok := allocatable[name]
	part, whole := q.Value(), a.Value()
	if name == v1.ResourceCPU {
		part, whole = q.MilliValue(), a.MilliValue()
	}
	if !ok || whole <= 0 {
		return q.String()
	}
	// Integer arithmetic, so that 290m of 1 cpu is 29%, not the 28% a
	// float would truncate to; floats only for amounts beyond it.
	var pct int64
	if part <= math.MaxInt64/100 {
		pct = part * 100 / whole
	} else {
		pct = int64(float64(part) / float64(whole) * 100)
	}
	return fmt.Sprintf("%s (%d%%)", q.String(), pct)
}
