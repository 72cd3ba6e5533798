package agent

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/status"
)

// terminal reports whether the pod's last published status is Succeeded or
// Failed (rejected pods included): such a pod holds no devices.
func terminal(statuses *status.Manager, uid types.UID) bool {
	st, ok := statuses.Get(uid)
	return ok && (st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed)
}

// activePods are the pods the pod-resources API lists: every pod berth
// runs that is not terminal.
type activePods struct{ statuses *status.Manager }

func (a activePods) GetPods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range a.statuses.Pods() {
		if p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			out = append(out, &p)
		}
	}
	return out
}

func (a activePods) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	for _, p := range a.GetPods() {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// Devices answers /devices: the device manager's view, with pod names.
func (a *apiSource) Devices() devicemanager.Snapshot {
	names := map[string]*v1.Pod{}
	pods := a.statuses.Pods()
	for i := range pods {
		names[string(pods[i].UID)] = &pods[i]
	}
	snap := devicemanager.Snapshot{Resources: a.devices.Resources(), Allocations: a.devices.Allocations()}
	for i := range snap.Allocations {
		if p := names[snap.Allocations[i].PodUID]; p != nil {
			snap.Allocations[i].PodNamespace, snap.Allocations[i].PodName = p.Namespace, p.Name
		}
	}
	return snap
}

func (a *apiSource) NodeEvents() []v1.Event { return a.events.NodeEvents() }
