// Package nodestatus is berth's Node in the API server: the object it
// registers, the status it reports (the kubelet's node status setters, as
// pure functions of what berth observed), and the loop that posts it as
// patches when it changed or when the report frequency says so.
package nodestatus

import (
	"maps"
	goruntime "runtime"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Observed is what the node's status is built from, read afresh for every
// update.
type Observed struct {
	// Capacity and Allocatable include the device plugins' resources.
	Capacity, Allocatable v1.ResourceList
	// Pressure are the MemoryPressure, DiskPressure and PIDPressure
	// conditions as the eviction manager keeps them.
	Pressure []v1.NodeCondition
	// NotReady is why the node cannot run pods (the runtime or the PLEG is
	// unhealthy); empty when it can.
	NotReady string
	Info     v1.NodeSystemInfo
	// Images are the runtime's images, for the scheduler's image locality.
	Images []v1.ContainerImage
	// Runtime is what the runtime can do.
	Runtime RuntimeFeatures
	// VolumesInUse are the attachable volumes mounted on the node (CSI),
	// which the attach-detach controller must not detach yet.
	VolumesInUse []v1.UniqueVolumeName
}

// Identity is what does not change while berth runs.
type Identity struct {
	Name       string
	Labels     map[string]string // added to the well-known ones
	Taints     []v1.Taint        // at registration only
	ProviderID string
	Addresses  []v1.NodeAddress
	// Port is the secure API's port, where the API server calls berth.
	Port int32
}

// The Ready condition's reasons and messages, the kubelet's.
const (
	reasonReady       = "KubeletReady"
	reasonNotReady    = "KubeletNotReady"
	messageReady      = "kubelet is posting ready status"
	architectureLabel = v1.LabelArchStable
)

// WellKnownLabels are the labels every kubelet sets on its Node.
func WellKnownLabels(name string) map[string]string {
	return map[string]string{
		v1.LabelHostname:  name,
		v1.LabelOSStable:  goruntime.GOOS,
		architectureLabel: goruntime.GOARCH,
	}
}

// Initial is the Node berth registers: its labels, taints and provider ID,
// with the status as observed.
func Initial(id Identity, obs Observed, now time.Time) *v1.Node {
	n := &v1.Node{}
	n.Name = id.Name
	n.Labels = WellKnownLabels(id.Name)
	maps.Copy(n.Labels, id.Labels)
	n.Spec.ProviderID = id.ProviderID
	n.Spec.Taints = slices.Clone(id.Taints)
	n.Status = Status(id, obs, v1.NodeStatus{}, now)
	return n
}

// Status is the node's status as berth reports it at now, from prev (what
// the API server has): conditions keep their transition time while their
// status holds, and every condition berth owns gets now as its heartbeat.
// Conditions others own (a controller's) are kept as they are.
func Status(id Identity, obs Observed, prev v1.NodeStatus, now time.Time) v1.NodeStatus {
	st := v1.NodeStatus{
		Capacity:    obs.Capacity.DeepCopy(),
		Allocatable: obs.Allocatable.DeepCopy(),
		Addresses:   slices.Clone(id.Addresses),
		NodeInfo:    obs.Info,
		Images:      obs.Images,
		// The kubelet sets an empty list where the runtime lists no
		// handlers; the API server drops it the same as nil.
		RuntimeHandlers: obs.Runtime.Handlers,
		Features:        obs.Runtime.Features,
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: id.Port}},
		VolumesInUse:    slices.Clone(obs.VolumesInUse),
		// The attach-detach controller's, kept as it is: the patch from
		// prev would otherwise remove it.
		VolumesAttached: slices.Clone(prev.VolumesAttached),
	}
	owned := map[v1.NodeConditionType]v1.NodeCondition{}
	for _, c := range obs.Pressure {
		owned[c.Type] = c
	}
	owned[v1.NodeReady] = readyCondition(obs.NotReady)

	order := []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure, v1.NodeReady}
	for _, t := range order {
		c, ok := owned[t]
		if !ok {
			continue
		}
		st.Conditions = append(st.Conditions, carry(c, findCondition(prev.Conditions, t), now))
	}
	for _, c := range prev.Conditions {
		if _, ok := owned[c.Type]; !ok {
			st.Conditions = append(st.Conditions, c)
		}
	}
	return st
}

func readyCondition(notReady string) v1.NodeCondition {
	if notReady == "" {
		return v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: reasonReady, Message: messageReady}
	}
	return v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: reasonNotReady, Message: notReady}
}

func findCondition(cs []v1.NodeCondition, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// Changed reports whether next says anything prev did not, heartbeats
// aside (the kubelet's nodeStatusHasChanged): only then is a status posted
// before the report frequency asks for one.
func Changed(prev, next v1.NodeStatus) bool {
	strip := func(st v1.NodeStatus) v1.NodeStatus {
		st = *st.DeepCopy()
		for i := range st.Conditions {
			st.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		slices.SortFunc(st.Conditions, func(a, b v1.NodeCondition) int {
			switch {
			case a.Type < b.Type:
				return -1
			case a.Type > b.Type:
				return 1
			}
			return 0
		})
		return st
	}
	return !apiequality.Semantic.DeepEqual(strip(prev), strip(next))
}

// Due reports whether a status must be posted now: it changed, or the last
// post is a report period old.
func Due(changed bool, lastPosted, now time.Time, reportEvery time.Duration) bool {
	return changed || lastPosted.IsZero() || now.Sub(lastPosted) >= reportEvery
}

// Reconcile returns the labels an existing Node lacks or has wrong of the
// ones berth sets (the kubelet's reconcile on registration), and whether
// any had to change.
func Reconcile(existing *v1.Node, id Identity) (map[string]string, bool) {
	want := WellKnownLabels(id.Name)
	maps.Copy(want, id.Labels)
	out := maps.Clone(existing.Labels)
	if out == nil {
		out = map[string]string{}
	}
	changed := false
	for k, v := range want {
		if out[k] != v {
			out[k] = v
			changed = true
		}
	}
	return out, changed
}
