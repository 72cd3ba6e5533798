package podworker

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/status"
)

// StepKind is one kind of thing a sync does to the runtime.
type StepKind string

const (
	// StepKillPod stops every container (sidecars last) and the sandbox.
	StepKillPod StepKind = "KillPod"
	// StepPrepareSandbox builds the sandbox's config, which every later
	// step needs: the one step that runs even when no sandbox is created.
	StepPrepareSandbox StepKind = "PrepareSandbox"
	// StepCreateSandbox sets up volumes and the pod cgroup, then creates
	// the sandbox.
	StepCreateSandbox StepKind = "CreateSandbox"
	// StepKillContainer stops one container (its preStop hook first).
	StepKillContainer StepKind = "KillContainer"
	// StepStartContainer pulls, creates and starts one container and runs
	// its postStart hook, unless a back-off says to wait.
	StepStartContainer StepKind = "StartContainer"
)

// Step is one step of a plan, in the order the worker carries them out.
type Step struct {
	Kind StepKind
	// Kill is the container a StepKillContainer stops.
	Kill Kill
	// Container is the container a StepStartContainer starts; Init marks a
	// (sidecar or regular) init container, Ephemeral an ephemeral one.
	Container *v1.Container
	Init      bool
	Ephemeral bool
}

func (s Step) String() string {
	switch s.Kind {
	case StepKillContainer:
		return fmt.Sprintf("%s %s", s.Kind, s.Kill.Name)
	case StepStartContainer:
		return fmt.Sprintf("%s %s", s.Kind, s.Container.Name)
	}
	return string(s.Kind)
}

// Steps lists what p asks of the runtime, in the kubelet's SyncPod order:
// kill the pod, prepare (and create) the sandbox, kill containers, then
// start ephemeral, init and app containers. An idle plan has none, and a
// plan that only kills the pod has one.
func (p Plan) Steps(pod *v1.Pod) []Step {
	if p.Idle() {
		return nil
	}
	var out []Step
	if p.KillPod {
		out = append(out, Step{Kind: StepKillPod})
		if !p.CreateSandbox {
			return out
		}
	}
	out = append(out, Step{Kind: StepPrepareSandbox})
	if p.CreateSandbox {
		out = append(out, Step{Kind: StepCreateSandbox})
	}
	for _, k := range p.Kill {
		out = append(out, Step{Kind: StepKillContainer, Kill: k})
	}
	for _, i := range p.StartEphemeral {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		out = append(out, Step{Kind: StepStartContainer, Container: &c, Ephemeral: true})
	}
	for _, i := range p.StartInit {
		out = append(out, Step{Kind: StepStartContainer, Container: &pod.Spec.InitContainers[i], Init: true})
	}
	for _, i := range p.Start {
		out = append(out, Step{Kind: StepStartContainer, Container: &pod.Spec.Containers[i]})
	}
	return out
}

// blocks reports whether a failure of step s holds back the steps after it:
// a regular init container that did not start does; a sidecar's failure,
// or an app container's, does not.
func (s Step) blocks() bool {
	return s.Kind == StepStartContainer && s.Init && !isSidecar(s.Container)
}

// startGate is what the back-offs decide of a container start: wait (and
// for how long) with a waiting state and an event, or go on. It is decided
// from the back-off state, the clock's now and the runtime snapshot, before
// any I/O for the container.
type startGate struct {
	wait    time.Duration
	waiting status.Waiting
	// event is the event the wait posts: type, reason, message.
	eventType, eventReason, eventMessage string
}

// gateStart applies the crash-loop back-off, then the image-pull back-off,
// to starting c now; nil means the start goes on. A start that goes on is
// recorded in the crash-loop back-off (checkBackOff), which doubles the
// next delay, as the kubelet's doBackOff does.
func gateStart(crash, pull *flowcontrol.Backoff, now time.Time, pod *v1.Pod, c *v1.Container, st *container.PodStatus) *startGate {
	if left, msg := checkBackOff(crash, now, pod, c, st); left > 0 {
		return &startGate{
			wait:      left,
			waiting:   status.Waiting{Reason: reasonCrashLoopBackOff, Message: msg},
			eventType: v1.EventTypeWarning, eventReason: "BackOff",
			eventMessage: fmt.Sprintf("Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID),
		}
	}
	key := pullKey(pod, c)
	if pull.IsInBackOffSinceUpdate(key, now) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		return &startGate{
			wait:      pull.Get(key),
			waiting:   status.Waiting{Reason: reasonImagePullBackOff, Message: msg},
			eventType: v1.EventTypeNormal, eventReason: "BackOff", eventMessage: msg,
		}
	}
	return nil
}

func pullKey(pod *v1.Pod, c *v1.Container) string { return string(pod.UID) + "/" + c.Image }
