package eviction

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// conditionText is what the kubelet's node status says of one pressure
// condition, and the node event it records when the condition turns.
type conditionText struct {
	reason, message, event string
}

// pressureText returns the kubelet's words for condition c with pressure on
// (True) or off (False).
func pressureText(c v1.NodeConditionType, pressure bool) conditionText {
	switch {
	case c == v1.NodeMemoryPressure && pressure:
		return conditionText{"KubeletHasInsufficientMemory", "kubelet has insufficient memory available", "NodeHasInsufficientMemory"}
	case c == v1.NodeMemoryPressure:
		return conditionText{"KubeletHasSufficientMemory", "kubelet has sufficient memory available", "NodeHasSufficientMemory"}
	case c == v1.NodeDiskPressure && pressure:
		return conditionText{"KubeletHasDiskPressure", "kubelet has disk pressure", "NodeHasDiskPressure"}
	case c == v1.NodeDiskPressure:
		return conditionText{"KubeletHasNoDiskPressure", "kubelet has no disk pressure", "NodeHasNoDiskPressure"}
	case c == v1.NodePIDPressure && pressure:
		return conditionText{"KubeletHasInsufficientPID", "kubelet has insufficient PID available", "NodeHasInsufficientPID"}
	default:
		return conditionText{"KubeletHasSufficientPID", "kubelet has sufficient PID available", "NodeHasSufficientPID"}
	}
}

// notObservedMessage is the message of a condition before the first pass.
const notObservedMessage = "berth has not measured the node yet"

// initialConditions are the pressure conditions before the first pass:
// Unknown, as a node's are before its first status.
func initialConditions() []v1.NodeCondition {
	out := make([]v1.NodeCondition, 0, len(conditionTypes()))
	for _, c := range conditionTypes() {
		out = append(out, v1.NodeCondition{Type: c, Status: v1.ConditionUnknown, Message: notObservedMessage})
	}
	return out
}

// updateConditions sets every pressure condition from the conditions under
// pressure, as the kubelet's node status setters do: the heartbeat moves to
// now; a condition that turns gets its reason, message and transition time,
// and yields the reason of its node event (NodeHasDiskPressure, ...).
func updateConditions(prev []v1.NodeCondition, pressure []v1.NodeConditionType, now time.Time) (next []v1.NodeCondition, events []string) {
	t := metav1.NewTime(now)
	next = make([]v1.NodeCondition, 0, len(conditionTypes()))
	for _, c := range conditionTypes() {
		cond := v1.NodeCondition{Type: c, Status: v1.ConditionUnknown}
		if i := slices.IndexFunc(prev, func(p v1.NodeCondition) bool { return p.Type == c }); i >= 0 {
			cond = prev[i]
		}
		cond.LastHeartbeatTime = t
		on := slices.Contains(pressure, c)
		want := v1.ConditionFalse
		if on {
			want = v1.ConditionTrue
		}
		if cond.Status != want {
			text := pressureText(c, on)
			cond.Status, cond.Reason, cond.Message = want, text.reason, text.message
			cond.LastTransitionTime = t
			events = append(events, text.event)
		}
		next = append(next, cond)
	}
	return next, events
}
