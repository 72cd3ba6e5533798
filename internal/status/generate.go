// Package status turns the runtime's view of a pod into the Kubernetes API
// v1.PodStatus the way the kubelet does (generateAPIPodStatus, getPhase,
// convertToAPIContainerStatuses, the status manager's condition transition
// times and timestamp normalisation), and keeps the latest status of every
// pod for readers. Generation is pure; Manager is the one shared table.
package status

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/qos"
)

// DefaultRuntimeName is the scheme of container IDs when Input.RuntimeName
// is empty: berth's embedded runtime is containerd.
const DefaultRuntimeName = "containerd"

// maxTerminationMessageBytes is the budget the kubelet shares among all of a
// pod's containers for termination messages in the published status
// (kubecontainer.MaxPodTerminationMessageLogLength).
const maxTerminationMessageBytes = 1024 * 12

// Waiting is why a container is not running, from the last sync (the
// kubelet's reasonCache): for example {Reason: "CrashLoopBackOff", Message:
// "back-off 20s restarting failed container=app pod=web-node1_default(uid)"},
// "ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError",
// "CreateContainerError", "RunContainerError".
type Waiting struct {
	Reason  string
	Message string
}

// Input is everything Generate needs; it is not modified.
type Input struct {
	Pod *v1.Pod
	// Runtime is what the runtime reports; nil or empty when nothing has been
	// created yet.
	Runtime *container.PodStatus
	// RuntimeName is the scheme of published container IDs
	// ("containerd://<id>"); DefaultRuntimeName when empty.
	RuntimeName string
	// Waiting holds the last sync's failure per container name. As in the
	// kubelet it is shown only for a container that is due to be (re)started.
	Waiting map[string]Waiting
	// SyncError is a pod-level failure of the last sync (sandbox creation,
	// CNI, volume setup). The kubelet only records it as an event; berth also
	// shows it in the PodReadyToStartContainers condition (when that is
	// False) and as the message of every container still waiting in its
	// default ContainerCreating/PodInitializing state.
	SyncError *Waiting
	// Ready reports the readiness of a running container by its runtime ID
	// (no scheme). nil: every started container is ready, the kubelet's
	// behaviour without a readiness probe.
	Ready func(containerID string) bool
	// Started reports whether a running container has passed its startup
	// probe. nil: every running container has started.
	Started func(containerID string) bool
	// HostIP is the node's address: status.hostIP(s), and podIP(s) of
	// hostNetwork pods.
	HostIP string
	// Previous is the last status published for this pod (nil: none, and
	// Pod.Status is used, as the kubelet does). It keeps startTime, restart
	// counts of removed containers and condition transition times stable.
	Previous *v1.PodStatus
	// Now stamps startTime (when not set yet) and condition transitions.
	Now time.Time
	// Terminating means the pod is being killed: nothing is restarted, and
	// once no container is active the phase becomes terminal.
	Terminating bool
}

// Generate computes the API status of in.Pod. It is pure: the same Input
// always gives the same output, and nothing reachable from Input is changed.
func Generate(in Input) v1.PodStatus {
	g := newGenerator(in)
	pod := in.Pod

	s := v1.PodStatus{QOSClass: qos.PodQOSClass(pod)}
	s.InitContainerStatuses = g.containerStatuses(pod.Spec.InitContainers, g.old.InitContainerStatuses, initList)
	s.ContainerStatuses = g.containerStatuses(pod.Spec.Containers, g.old.ContainerStatuses, regularList)
	s.EphemeralContainerStatuses = g.containerStatuses(EphemeralContainers(pod), g.old.EphemeralContainerStatuses, ephemeralList)

	// Readiness is settled before the phase (the kubelet's getPhase sees the
	// previous sync's "started" of sidecars): one sync sooner, same rule.
	all := append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	terminal := in.Terminating && len(g.rt.ActiveContainers()) == 0
	s.Phase = getPhase(&pod.Spec, all, terminal, g.anyActiveRegularContainer())
	g.keepPhase(&s)

	s.Conditions = g.conditions(all, s.Phase)
	g.setNetwork(&s)

	// The spec generation this status reflects (PodObservedGenerationTracking,
	// on by default since Kubernetes 1.34): a client waiting on an update
	// of the pod knows when the node has seen it.
	s.ObservedGeneration = pod.Generation

	s.StartTime = g.old.StartTime.DeepCopy()
	if s.StartTime == nil || s.StartTime.IsZero() {
		start := metav1.NewTime(in.Now)
		s.StartTime = &start
	}
	normalize(pod, &s)
	return s
}

// generator carries the derived inputs through one Generate call.
type generator struct {
	in  Input
	pod *v1.Pod
	rt  *container.PodStatus // never nil; containers newest first
	old *v1.PodStatus        // deep copy: free to alias into the result
}

func newGenerator(in Input) *generator {
	g := &generator{in: in, pod: in.Pod}
	g.rt = sortedRuntime(in.Runtime)
	if in.Previous != nil {
		g.old = in.Previous.DeepCopy()
	} else {
		g.old = in.Pod.Status.DeepCopy()
	}
	return g
}

// keepPhase applies the kubelet's rules around the previous phase: a pod
// never leaves a terminal phase, and status.reason/message belong to the
// phase they were set with.
func (g *generator) keepPhase(s *v1.PodStatus) {
	if !isTerminal(s.Phase) && isTerminal(g.old.Phase) {
		s.Phase = g.old.Phase
	}
	if s.Phase == g.old.Phase {
		s.Reason, s.Message = g.old.Reason, g.old.Message
	}
}

func isTerminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// containerID is the published form of a runtime container ID.
func (g *generator) containerID(id string) string {
	scheme := g.in.RuntimeName
	if scheme == "" {
		scheme = DefaultRuntimeName
	}
	return scheme + "://" + id
}

// runtimeID strips the scheme from a published container ID.
func runtimeID(published string) string {
	if _, id, ok := strings.Cut(published, "://"); ok {
		return id
	}
	return published
}

// normalize truncates timestamps to the second and shortens termination
// messages, as the kubelet's status manager does before publishing: the API
// stores RFC 3339 times, so a status compares equal after a round trip.
// EphemeralContainers returns the pod's ephemeral containers as the
// containers they are run as: the kubelet's own conversion, since the two
// share their fields.
func EphemeralContainers(pod *v1.Pod) []v1.Container {
	var out []v1.Container
	for i := range pod.Spec.EphemeralContainers {
		out = append(out, v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return out
}

func normalize(pod *v1.Pod, s *v1.PodStatus) {
	budget := maxTerminationMessageBytes
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers); n > 0 {
		budget /= n
	}
	if s.StartTime != nil {
		*s.StartTime = second(*s.StartTime)
	}
	for i := range s.Conditions {
		s.Conditions[i].LastProbeTime = second(s.Conditions[i].LastProbeTime)
		s.Conditions[i].LastTransitionTime = second(s.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			normalizeState(&list[i].State, budget)
			normalizeState(&list[i].LastTerminationState, budget)
		}
	}
}

func normalizeState(st *v1.ContainerState, budget int) {
	if st.Running != nil {
		st.Running.StartedAt = second(st.Running.StartedAt)
	}
	if t := st.Terminated; t != nil {
		t.StartedAt = second(t.StartedAt)
		t.FinishedAt = second(t.FinishedAt)
		if len(t.Message) > budget {
			t.Message = t.Message[:budget]
		}
	}
}

func second(t metav1.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t.UTC().Truncate(time.Second))
}
