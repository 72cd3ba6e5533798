package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// WidgetResource is the extended resource of the test device plugin.
const WidgetResource = "example.com/widget"

// Slot is one place for a pod on the chaos node. Its shape is fixed by its
// index; its generation grows each time churn replaces its pod, which gives
// the new pod a new UID.
type Slot struct {
	Index int
	Gen   int
	// Applied pods are made with berth apply (stored in <root>/local-pods);
	// the others are static pods from a manifest file.
	Applied bool
	// Containers are the names of the pod's containers.
	Containers []string
	// Widgets is how many devices the first container asks for.
	Widgets int
	// Probe gives every container a readiness probe, so that berth keeps
	// probe state (<root>/probes/state.json) across restarts.
	Probe bool
}

// Layout returns the node's n slots: every fourth pod applied, every third
// with two containers, every other one probed, and one in three asking for
// one or two widgets. The shapes depend on the index only, so a seed
// replays on the same node.
func Layout(n int) []Slot {
	slots := make([]Slot, n)
	for i := range slots {
		s := Slot{Index: i, Applied: i%4 == 3, Containers: []string{"main"}, Probe: i%2 == 0}
		if i%3 == 1 {
			s.Containers = append(s.Containers, "side")
		}
		switch i % 6 {
		case 0:
			s.Widgets = 1
		case 2:
			s.Widgets = 2
		}
		slots[i] = s
	}
	return slots
}

// WidgetCapacity is how many devices the plugin must offer for slots: all
// they ask for, plus room for the replacements of one churn, whose old pods
// may still hold theirs while the new ones are admitted.
func WidgetCapacity(slots []Slot, maxChurn int) int {
	total := 0
	for _, s := range slots {
		total += s.Widgets
	}
	if total == 0 {
		return 0
	}
	return total + 2*max(maxChurn, 1)
}

// Name is the pod's metadata.name; a static pod shows in berth as
// "<name>-<node>".
func (s Slot) Name() string {
	if s.Applied {
		return fmt.Sprintf("chaos-a%02d", s.Index)
	}
	return fmt.Sprintf("chaos-s%02d", s.Index)
}

// FullName is the pod's name as berth lists it on node.
func (s Slot) FullName(node string) string {
	if s.Applied {
		return s.Name()
	}
	return s.Name() + "-" + node
}

// FileName is the slot's manifest (static pods) or the file given to
// berth apply.
func (s Slot) FileName() string { return s.Name() + ".yaml" }

// Manifest is the pod's YAML. Containers trap SIGTERM so that deleting a
// pod takes no grace period.
func (s Slot) Manifest(image string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n", s.Name())
	fmt.Fprintf(&b, "  labels: {chaos-slot: %q, chaos-gen: %q}\n", fmt.Sprint(s.Index), fmt.Sprint(s.Gen))
	b.WriteString("spec:\n  terminationGracePeriodSeconds: 5\n  containers:\n")
	for i, c := range s.Containers {
		fmt.Fprintf(&b, "  - name: %s\n    image: %s\n", c, image)
		b.WriteString(`    command: ["sh", "-c", "trap 'exit 0' TERM; touch /tmp/ready; sleep 1000000 & wait"]` + "\n")
		if i == 0 && s.Widgets > 0 {
			fmt.Fprintf(&b, "    resources:\n      limits: {%s: %d}\n", WidgetResource, s.Widgets)
		}
		if s.Probe {
			b.WriteString("    readinessProbe:\n      exec: {command: [cat, /tmp/ready]}\n      periodSeconds: 10\n")
		}
	}
	return b.String()
}

// Want is what the slot's pod must look like once converged.
func (s Slot) Want(node string) WantPod {
	return WantPod{Name: s.FullName(node), Containers: s.Containers, Widgets: s.Widgets, Gen: s.Gen}
}

// Damage applies a Truncate or Garbage damage to data and returns what to
// write in its place.
func DamageBytes(r *rand.Rand, d Damage, data []byte) ([]byte, error) {
	switch d {
	case Truncate:
		if len(data) == 0 {
			return nil, nil
		}
		return data[:r.IntN(len(data))], nil
	case Garbage:
		out := make([]byte, 1+r.IntN(512))
		for i := range out {
			out[i] = byte(r.UintN(256))
		}
		return out, nil
	}
	return nil, fmt.Errorf("damage %s is not a rewrite of the bytes", d)
}
