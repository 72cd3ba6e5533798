package agent

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/berth-dev/berth/internal/cm"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/eviction"
	"github.com/berth-dev/berth/internal/nodestatus"
)

// Node answers /node: the node as the kubelet would report it to an API
// server, with the conditions the eviction manager sets and the Ready
// condition, computed as in cluster mode, so that a dead runtime or a
// stuck PLEG shows on a standalone node too.
func (a *apiSource) Node() v1.Node {
	devCapacity, devAllocatable := a.devices.Capacity()
	n := nodeObject(a.nodeName, a.capacity, a.allocatable, devCapacity, devAllocatable)
	why := notReady(context.Background(), a.cri.Runtime(), a.pleg, n.Status.Capacity, a.network)
	n.Status.Conditions = append(a.evictions.Conditions(), a.ready.observe(why, a.clk.Now()))
	return *n
}

// readyStatusTimeout bounds the CRI Status call behind the Ready
// condition, as the runtime health check's: a runtime that does not say
// how it is within seconds is down.
const readyStatusTimeout = 5 * time.Second

// notReady is why the node cannot run pods now, "" when it can: the
// kubelet's Ready condition (nodestatus.NotReady) over the runtime's CRI
// Status, the PLEG's health and the node's capacity. Cluster mode's Node
// and standalone /node both read it here.
func notReady(ctx context.Context, cri runtimeapi.RuntimeServiceClient, pleg interface{ Healthy() error }, capacity v1.ResourceList, network func() string) string {
	h := runtimeHealth(ctx, cri, network)
	h.PLEG, h.Capacity = pleg.Healthy(), capacity
	return nodestatus.NotReady(h)
}

// runtimeHealth is the runtime's part of the node's health: its CRI
// Status and berth's view of the pod network (network, nil for none).
func runtimeHealth(ctx context.Context, cri runtimeapi.RuntimeServiceClient, network func() string) nodestatus.Health {
	ctx, cancel := context.WithTimeout(ctx, readyStatusTimeout)
	defer cancel()
	var h nodestatus.Health
	resp, err := cri.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		h.RuntimeErr = fmt.Errorf("runtime status: %w", err)
	} else {
		h.Runtime = resp.GetStatus()
	}
	if network != nil {
		h.Network = network()
	}
	return h
}

// networkNotReady is the kubelet's runtimeState.networkErrors: nil when
// new pods off the host's network can get an address.
func networkNotReady(cri runtimeapi.RuntimeServiceClient, network func() string) func(context.Context) error {
	return func(ctx context.Context) error {
		if why := nodestatus.NetworkNotReady(runtimeHealth(ctx, cri, network)); why != "" {
			return errors.New(why)
		}
		return nil
	}
}

// readyTracker keeps the Ready condition /node last showed, for its
// transition time: standalone, there is no API server to keep it.
type readyTracker struct {
	mu   sync.Mutex
	last *v1.NodeCondition
}

func (r *readyTracker) observe(notReady string, now time.Time) v1.NodeCondition {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := nodestatus.ReadyCondition(notReady, r.last, now)
	r.last = &c
	return c
}

// admissionDeviceResources are the device plugins' resources a new pod is
// admitted against: those of connected plugins only. A resource whose
// plugin is away is left out, as the kubelet leaves out a resource it does
// not list, so that a pod needing it waits for the plugin in device
// admission rather than being refused for want of healthy devices.
func admissionDeviceResources(rs []devicemanager.ResourceStatus) (capacity, allocatable v1.ResourceList) {
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	for _, r := range rs {
		// A plugin that has not listed its devices yet (just registered
		// again after a restart of berth) is left out, as one not
		// connected is: the pod is admitted without its devices and waits
		// for them in its worker, not refused for none.
		if !r.Connected || !r.Listed {
			continue
		}
		name := v1.ResourceName(r.Name)
		capacity[name] = *resource.NewQuantity(int64(r.Capacity), resource.DecimalSI)
		allocatable[name] = *resource.NewQuantity(int64(r.Allocatable), resource.DecimalSI)
	}
	return capacity, allocatable
}

// nodeObject is the node as berth reports it and admits pods against: the
// kubelet's well-known labels, and the machine's capacity and allocatable
// with the device plugins' resources added.
func nodeObject(name string, capacity, allocatable, devCapacity, devAllocatable v1.ResourceList) *v1.Node {
	n := &v1.Node{}
	n.Name = name
	n.Labels = map[string]string{
		v1.LabelHostname:   name,
		v1.LabelOSStable:   goruntime.GOOS,
		v1.LabelArchStable: goruntime.GOARCH,
	}
	n.Status.Capacity = capacity.DeepCopy()
	n.Status.Allocatable = allocatable.DeepCopy()
	for res, q := range devCapacity {
		n.Status.Capacity[res] = q.DeepCopy()
	}
	for res, q := range devAllocatable {
		n.Status.Allocatable[res] = q.DeepCopy()
	}
	// The pid capacity sizes the kubepods cgroup only; it is no Node resource.
	delete(n.Status.Capacity, cm.ResourcePID)
	delete(n.Status.Allocatable, cm.ResourcePID)
	return n
}

// Eviction answers /node/eviction.
func (a *apiSource) Eviction() eviction.Status { return a.evictions.Status() }

// StatsSummary answers /stats/summary.
func (a *apiSource) StatsSummary() (*statsapi.Summary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	return a.stats.Get(ctx)
}
