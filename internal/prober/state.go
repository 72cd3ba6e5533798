package prober

import "time"

// The kubelet's probe worker (pkg/kubelet/prober/worker.go, doProbe) as a
// pure state machine: step decides what one attempt does with what the
// worker sees, record folds a probe outcome into the thresholds. Neither
// touches a clock, a lock or the network, so every rule is table-tested.

// probeConfig is what a worker's decisions need from its probe spec.
type probeConfig struct {
	probeType        ProbeType
	successThreshold int
	failureThreshold int
	initialDelay     time.Duration
	period           time.Duration
	// gated: the container has a startup probe, and this (liveness or
	// readiness) probe waits until it succeeded.
	gated bool
}

// probeState is one worker's memory between attempts.
type probeState struct {
	containerID string    // bare runtime ID the state belongs to; "" before the first container
	result      Result    // the result cached for containerID
	lastResult  Result    // outcome of the last probe
	run         int       // consecutive probes that returned lastResult
	onHold      bool      // no probing until a new container appears
	lastProbe   time.Time // start of the last probe of this container; zero before the first
}

// observation is what a worker sees of the world at one attempt.
type observation struct {
	now        time.Time
	agentStart time.Time // when this manager started (see probeDue)

	statusKnown bool // the pod has a published status
	podFinished bool // phase Succeeded or Failed
	containerID string
	running     bool
	startedAt   time.Time
	exited      bool
	restarts    bool // an exited container will be started again
	terminating bool // deletion requested, or StopLivenessAndStartup
	startupDone bool // the startup probe of containerID succeeded (read when gated)

	// cached is the result already cached for containerID: restored from
	// the state file after a berth restart, or left by an earlier worker.
	cached    Result
	hasCached bool
}

type verdict int

const (
	wait verdict = iota
	probeNow
	stop
)

type decision struct {
	verdict verdict
	at      time.Time // wait: when to look again
	// poll: waiting for something only a new published status brings (a
	// container, a running state, a successful startup); AddPod may wake it.
	poll    bool
	publish bool   // cache the new state's result for its containerID
	drop    string // a replaced container whose cached result must go
}

// maxPoll bounds how long a worker waiting for its container sleeps, so a
// new container is noticed within a second even with a long period.
const maxPoll = time.Second

// step is doProbe up to the probe itself.
func step(cfg probeConfig, s probeState, o observation) (probeState, decision) {
	var d decision
	waitPoll := func() (probeState, decision) {
		d.verdict, d.at, d.poll = wait, o.now.Add(min(cfg.period, maxPoll)), true
		return s, d
	}
	if !o.statusKnown {
		return waitPoll()
	}
	if o.podFinished {
		d.verdict = stop
		return s, d
	}
	if o.containerID == "" {
		return waitPoll()
	}
	if s.containerID != o.containerID {
		// A new container: forget the old one's result and counters, and
		// resume probing. A result already cached for this very container
		// (berth restarted) is kept rather than reset.
		d.drop = s.containerID
		s = probeState{containerID: o.containerID, result: cfg.probeType.initial()}
		if o.hasCached {
			s.result = o.cached
		}
		d.publish = true
	}
	if s.onHold {
		d.verdict, d.at = wait, o.now.Add(cfg.period)
		return s, d
	}
	if !o.running {
		if s.result != Failure {
			s.result = Failure
			d.publish = true
		}
		if o.exited && !o.restarts {
			d.verdict = stop
			return s, d
		}
		return waitPoll()
	}
	if o.terminating && cfg.probeType != Readiness {
		// Graceful shutdown: a last Success keeps the terminating container
		// from being restarted, and these probes stop for good.
		s.result = Success
		d.publish = true
		d.verdict = stop
		return s, d
	}
	if cfg.probeType == Startup && s.result == Success {
		// Started (restored after a berth restart): nothing to probe until
		// the next container.
		s.onHold = true
		d.verdict, d.at = wait, o.now.Add(cfg.period)
		return s, d
	}
	if cfg.gated && !o.startupDone {
		return waitPoll()
	}
	if due := probeDue(cfg, s, o); o.now.Before(due) {
		d.verdict, d.at = wait, due
		return s, d
	}
	s.lastProbe = o.now
	d.verdict = probeNow
	return s, d
}

// record counts a probe outcome (Success or Failure) against the
// thresholds; publish reports that s.result changed and must be cached (the
// cache holds s.result otherwise: step publishes it for every new
// container). Liveness failures and startup verdicts put the worker on hold
// until the container is replaced.
func record(cfg probeConfig, s probeState, r Result) (next probeState, publish bool) {
	if r == s.lastResult {
		s.run++
	} else {
		s.lastResult, s.run = r, 1
	}
	threshold := cfg.failureThreshold
	if r == Success {
		threshold = cfg.successThreshold
	}
	if s.run < threshold {
		return s, false
	}
	publish = s.result != r
	s.result = r
	if (cfg.probeType == Liveness && r == Failure) || cfg.probeType == Startup {
		s.onHold, s.run = true, 0
	}
	return s, publish
}
