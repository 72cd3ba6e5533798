package nodestatus

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Health is what the node's Ready condition is computed from: the inputs
// of the kubelet's ReadyCondition setter (its runtime state's runtime and
// network errors, the PLEG health check, the node's capacity), read afresh
// by the caller.
type Health struct {
	// Runtime is the runtime's answer to CRI Status; nil when RuntimeErr.
	Runtime *runtimeapi.RuntimeStatus
	// RuntimeErr is why the Status call failed: the runtime is down.
	RuntimeErr error
	// PLEG is the PLEG's health, nil when it relists in time.
	PLEG error
	// Capacity is the node's capacity.
	Capacity v1.ResourceList
	// Network is why berth's own view of the pod network keeps new pods
	// from an address ("" when it sees nothing wrong): the host's CNI
	// configuration is missing or invalid, or the Node has no podCIDR yet.
	// containerd says only "cni plugin not initialized" for all of these.
	Network string
}

// NetworkNotReady is the kubelet's network error of h ("" when none): the
// runtime's NetworkReady condition, with berth's own reason in its message
// when berth knows better. The node is NotReady for it, and new pods that
// are not on the host's network wait for it.
func NetworkNotReady(h Health) string {
	if h.RuntimeErr != nil {
		return ""
	}
	if h.Network != "" {
		c := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Reason: "NetworkPluginNotReady", Message: h.Network}
		return "container runtime network not ready: " + describeCondition(runtimeapi.NetworkReady, c)
	}
	if c := runtimeCondition(h.Runtime, runtimeapi.NetworkReady); c == nil || !c.GetStatus() {
		return "container runtime network not ready: " + describeCondition(runtimeapi.NetworkReady, c)
	}
	return ""
}

// requiredCapacity is what a node must report before it is Ready, the
// kubelet's with localStorageCapacityIsolation (its default).
var requiredCapacity = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage}

// NotReady is why the node cannot run pods, "" when it can, in the
// kubelet's words and order: the runtime (down, or its RuntimeReady
// condition false), the PLEG, the runtime's network (its NetworkReady
// condition), missing capacity. The kubelet learns the runtime is down
// when its periodic Status has not succeeded for 30 s; berth asks when
// the condition is wanted, so a failed Status says so at once.
func NotReady(h Health) string {
	var problems []string
	if h.RuntimeErr != nil {
		problems = append(problems, "container runtime is down: "+h.RuntimeErr.Error())
	} else if c := runtimeCondition(h.Runtime, runtimeapi.RuntimeReady); c == nil || !c.GetStatus() {
		problems = append(problems, "container runtime not ready: "+describeCondition(runtimeapi.RuntimeReady, c))
	}
	if h.PLEG != nil {
		problems = append(problems, "PLEG is not healthy: "+h.PLEG.Error())
	}
	if n := NetworkNotReady(h); n != "" {
		problems = append(problems, n)
	}
	var missing []string
	for _, r := range requiredCapacity {
		if _, ok := h.Capacity[r]; !ok {
			missing = append(missing, string(r))
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "missing node capacity for resources: "+strings.Join(missing, ", "))
	}
	return strings.Join(problems, ", ")
}

func runtimeCondition(st *runtimeapi.RuntimeStatus, t string) *runtimeapi.RuntimeCondition {
	for _, c := range st.GetConditions() {
		if c.GetType() == t {
			return c
		}
	}
	return nil
}

// describeCondition writes a runtime condition as the kubelet does
// ("NetworkReady=false reason:NetworkPluginNotReady message:...").
func describeCondition(t string, c *runtimeapi.RuntimeCondition) string {
	if c == nil {
		return t + " condition missing"
	}
	return fmt.Sprintf("%s=%t reason:%s message:%s", t, c.GetStatus(), c.GetReason(), c.GetMessage())
}

// ReadyCondition is the node's Ready condition for what NotReady said,
// with the kubelet's reasons and messages, and now as its heartbeat; its
// transition time is prev's while the status holds, else now.
func ReadyCondition(notReady string, prev *v1.NodeCondition, now time.Time) v1.NodeCondition {
	return carry(readyCondition(notReady), prev, now)
}

// carry stamps c with now as its heartbeat, and keeps prev's transition
// time while the status is the same.
func carry(c v1.NodeCondition, prev *v1.NodeCondition, now time.Time) v1.NodeCondition {
	nowT := metav1.NewTime(now)
	c.LastHeartbeatTime, c.LastTransitionTime = nowT, nowT
	if prev != nil && prev.Status == c.Status {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	return c
}
