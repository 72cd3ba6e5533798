package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/eviction"
)

// describeNodeCmd writes the node: its conditions, capacity and
// allocatable, the eviction thresholds with what was last observed of
// them, and the node's events.
func describeNodeCmd(ctx context.Context, out io.Writer, client *apiClient, now time.Time) error {
	var node v1.Node
	if err := client.getJSON(ctx, "/node", "the node", &node); err != nil {
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
	_, err := io.WriteString(out, describeNode(&node, ev, events.Items, now))
	return err
}

func describeNode(node *v1.Node, ev eviction.Status, events []v1.Event, now time.Time) string {
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
