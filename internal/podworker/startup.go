package podworker

import "time"

// startPhase is a step of a pod's start, in the order a worker takes them.
type startPhase int

const (
	phaseAdmission       startPhase = iota // seen to admitted: admitters, device plugins
	phaseSandbox                           // volumes, pod cgroup, RunPodSandbox
	phaseImagePull                         // image status and pulls, waiting for a pull slot included
	phaseContainerCreate                   // container files and config, CreateContainer
	phaseContainerStart                    // StartContainer and the postStart hook
	numStartPhases
)

// String is the phase's label value.
func (p startPhase) String() string {
	switch p {
	case phaseAdmission:
		return "admission"
	case phaseSandbox:
		return "sandbox"
	case phaseImagePull:
		return "image_pull"
	case phaseContainerCreate:
		return "container_create"
	case phaseContainerStart:
		return "container_start"
	}
	return "unknown"
}

// podStart is one pod's start, from its worker seeing it to it running.
type podStart struct {
	total  time.Duration
	phases [numStartPhases]time.Duration
}

// startTracker adds up where one pod's start goes. The phases after
// admission count the steps that succeeded (a failed attempt and the wait
// before the retry show only in the total), summed over the pod's init and
// regular containers. It is owned by the worker goroutine.
type startTracker struct {
	seen     time.Time
	phases   [numStartPhases]time.Duration
	admitted bool
	// over is set once the start was reported, or when berth did not see it
	// from the beginning (a pod found in the runtime after a restart).
	over bool
}

// begin starts tracking a pod first seen at now.
func (t *startTracker) begin(now time.Time) { *t = startTracker{seen: now} }

// admit records that the pod was admitted at now. adopted means the runtime
// already had the pod: its start happened before berth saw it.
func (t *startTracker) admit(now time.Time, adopted bool) {
	if t.admitted || t.over {
		return
	}
	t.admitted = true
	if adopted {
		t.over = true
		return
	}
	t.phases[phaseAdmission] = now.Sub(t.seen)
}

// add counts d in phase p.
func (t *startTracker) add(p startPhase, d time.Duration) {
	if t.admitted && !t.over {
		t.phases[p] += d
	}
}

// running records that the pod runs at now and returns its start, the first
// time only.
func (t *startTracker) running(now time.Time) (podStart, bool) {
	if !t.admitted || t.over {
		return podStart{}, false
	}
	t.over = true
	return podStart{total: now.Sub(t.seen), phases: t.phases}, true
}
