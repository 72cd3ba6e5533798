package agent

import (
	"fmt"
	"log/slog"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/lifecycle"
)

// noteAdopted explains the admission of a pod berth found already running.
const noteAdopted = "admitted without checks: it was running (or stopped for good) when berth started, and a pod is admitted only once"

// admitter is the sync loop's record of the pods that hold the node's
// resources, and the one place new pods are admitted: in order, one at a
// time, each against what the pods admitted before it hold, so that a batch
// of pods is decided as the kubelet decides it, and the same way each time.
// Each is decided by the admission pipeline (internal/lifecycle), the
// kubelet's admit handlers. Owned by the sync loop.
type admitter struct {
	pipeline lifecycle.Pipeline
	// rejecter writes the status of the pods the pipeline rejects, and
	// forget removes it once they are no longer wanted.
	rejecter lifecycle.Rejecter
	forget   func(types.UID)
	// allocations are the in-place resizes' (nil: none).
	allocations allocations
	seq         int
	admitted    map[types.UID]*admittedPod
	// results are the decisions about the desired pods, for describe.
	results map[types.UID]admission.Result
	// victims are being preempted: committed to stop, they hold nothing.
	victims map[types.UID]bool
}

// allocations gives a pod with the resources allocated to it, which an
// in-place resize may have changed since the pod was admitted.
type allocations interface {
	Allocated(pod *v1.Pod) *v1.Pod
}

type admittedPod struct {
	info *admission.PodInfo
	seq  int
}

func newAdmitter(pipeline lifecycle.Pipeline, rejecter lifecycle.Rejecter, forget func(types.UID), alloc allocations) *admitter {
	return &admitter{
		pipeline:    pipeline,
		allocations: alloc,
		rejecter:    rejecter,
		forget:      forget,
		admitted:    map[types.UID]*admittedPod{},
		results:     map[types.UID]admission.Result{},
		victims:     map[types.UID]bool{},
	}
}

// admitEnv is what a decision reads of the rest of berth.
type admitEnv struct {
	node *v1.Node
	// terminal reports a pod that has stopped for good (completed,
	// evicted, rejected by a later check): it holds nothing.
	terminal func(uid types.UID) bool
	// adopted reports a pod berth found in the runtime or in its record of
	// stopped pods when it started: it was admitted before, and is never
	// checked again.
	adopted func(uid types.UID) bool
}

// preemption is a preemption decided by the pipeline's critical-pod
// admission handler, to carry out (preempt.go): kill the victims, then
// start the pod.
type preemption struct {
	pod     *v1.Pod
	victims []*v1.Pod
	// signal is the first resource the pod lacked, the kubelet's metric label.
	signal v1.ResourceName
}

// admit decides about every pod of next that is not admitted yet, marking
// next's entries, and returns the preemptions to carry out. prev is the
// desired set before: a pod replacing one of the same name (an edited
// manifest) is not counted against what the one it replaces holds.
func (a *admitter) admit(next, prev desiredSet, env admitEnv) []preemption {
	var fresh []*v1.Pod
	for _, e := range next {
		if _, ok := a.admitted[e.pod.UID]; !ok && e.runs() {
			fresh = append(fresh, e.pod)
		}
	}
	admissionOrder(fresh)
	var out []preemption
	for _, pod := range fresh {
		e := next[key(pod)]
		info := admission.NewPodInfo(pod)
		if env.adopted(pod.UID) {
			a.add(info)
			a.results[pod.UID] = admission.Result{Admit: true, Note: noteAdopted}
			continue
		}
		var replaced types.UID
		if p := prev[key(pod)]; p != nil {
			replaced = p.pod.UID
		}
		res := a.pipeline.Admit(&lifecycle.PodAdmitAttributes{Pod: info, Node: env.node, OtherPods: a.active(replaced, env.terminal)})
		a.results[pod.UID] = res
		if !res.Admit {
			e.rejected = &res
			continue
		}
		a.add(info)
		if res.Preemption == nil || len(res.Preemption.Victims) == 0 {
			continue
		}
		job := preemption{pod: pod, signal: res.Preemption.Requirements[0].Resource}
		for _, v := range res.Preemption.VictimPods() {
			if ve := next[key(v.Pod)]; ve != nil && ve.pod.UID == v.Pod.UID && len(ve.preempting) > 0 {
				// A critical pod still waiting for its own victims never
				// started: it is preempted by never starting.
				ve.preempting = nil
				ve.rejected = &admission.Result{Reason: reasonPreempting, Message: messagePreempted}
				a.results[v.Pod.UID] = *ve.rejected
				delete(a.admitted, v.Pod.UID)
			} else {
				a.victims[v.Pod.UID] = true
			}
			job.victims = append(job.victims, v.Pod)
			e.preempting = append(e.preempting, v.Pod.UID)
		}
		out = append(out, job)
	}
	return out
}

// publish writes what admit decided, outside the loop's lock: the status of
// each pod rejected since prev (its event and log too), through the one
// writer of rejections, and forgets the status of each rejected pod of prev
// that is no longer wanted. A critical pod preempted while it waited for
// its own victims is not a rejection: its status is the preemption's
// (syncLoop.pods), and it gets only the event.
func (a *admitter) publish(next, prev desiredSet) {
	for k, e := range next {
		if e.rejected == nil || (prev[k] != nil && prev[k].pod.UID == e.pod.UID) {
			continue
		}
		if e.rejected.Reason == reasonPreempting {
			a.rejecter.Log.Warn("pod rejected", "pod", k, "reason", e.rejected.Reason, "message", e.rejected.Message)
			a.rejecter.Events.Event(e.pod, v1.EventTypeWarning, e.rejected.Reason, e.rejected.Message)
			continue
		}
		a.rejecter.Reject(e.pod, e.rejected.Reason, e.rejected.Message)
	}
	for k, e := range prev {
		if e.rejected != nil && e.rejected.Reason != reasonPreempting && (next[k] == nil || next[k].pod.UID != e.pod.UID) {
			a.forget(e.pod.UID)
		}
	}
}

func (a *admitter) add(info *admission.PodInfo) {
	a.seq++
	a.admitted[info.Pod.UID] = &admittedPod{info: info, seq: a.seq}
}

// active are the admitted pods that hold resources, in the order they were
// admitted, but for exclude.
func (a *admitter) active(exclude types.UID, terminal func(types.UID) bool) []*admission.PodInfo {
	var held []*admittedPod
	for uid, p := range a.admitted {
		if uid != exclude && !a.victims[uid] && !terminal(uid) {
			held = append(held, p)
		}
	}
	slices.SortFunc(held, func(x, y *admittedPod) int { return x.seq - y.seq })
	out := make([]*admission.PodInfo, len(held))
	for i, p := range held {
		out[i] = p.info
		// A pod resized in place holds its allocation, not what it was
		// admitted with (the kubelet admits against allocated resources).
		if a.allocations != nil {
			if pod := a.allocations.Allocated(p.info.Pod); pod != p.info.Pod {
				out[i] = admission.NewPodInfo(pod)
			}
		}
	}
	return out
}

// preempted ends a preemption: its victims have stopped.
func (a *admitter) preempted(victims []*v1.Pod) {
	for _, v := range victims {
		delete(a.victims, v.UID)
	}
}

// prune forgets the pods that are gone: neither desired nor still being
// stopped (kept reports those). A pod being stopped holds its resources
// until it has, as the kubelet counts a terminating pod.
func (a *admitter) prune(desired desiredSet, kept func(types.UID) bool) {
	wanted := map[types.UID]bool{}
	for _, e := range desired {
		wanted[e.pod.UID] = true
	}
	for uid := range a.admitted {
		if !wanted[uid] && !kept(uid) && !a.victims[uid] {
			delete(a.admitted, uid)
		}
	}
	for uid := range a.results {
		if !wanted[uid] {
			delete(a.results, uid)
		}
	}
}

// result is the admission decision about a desired pod.
func (a *admitter) result(uid types.UID) (admission.Result, bool) {
	r, ok := a.results[uid]
	return r, ok
}

// nodeSysctls is the node's sysctl allowlist, built as the kubelet builds
// it at start-up (NewMainKubelet): the safe sysctls for the running kernel
// (SafeSysctlAllowlist) and the allowed unsafe ones. A kernel version that
// cannot be read leaves out the safe sysctls that depend on it, as the
// kubelet does, rather than stopping berth.
func nodeSysctls(allowedUnsafe []string, log *slog.Logger) (*admission.SysctlAllowlist, error) {
	kernel, err := admission.KernelVersion()
	if err != nil {
		log.Error("the kernel version is unknown: the safe sysctls namespaced only from some version on are not allowed", "err", err)
	}
	sysctls, err := admission.NewSysctlAllowlist(append(admission.SafeSysctls(kernel), allowedUnsafe...))
	if err != nil {
		return nil, fmt.Errorf("sysctl allowlist: %w", err)
	}
	return sysctls, nil
}

// forgetStatus is the status sync's forget (of the final status of a pod
// the API server no longer has). It keeps the status of a pod the pipeline
// rejected while the pod is still wanted (one of `berth apply`, which the
// API server never has): publish forgets it with the pod, as the kubelet's
// status manager keeps the status of every pod its pod manager has.
// The loop publishes its view before the Rejecter writes a status, so the
// view always knows a rejection whose status is written.
func (v *podView) forgetStatus(uid types.UID) {
	for _, e := range v.load().desired {
		if e.pod.UID == uid && e.rejected != nil {
			return
		}
	}
	v.statuses.Delete(uid)
}
