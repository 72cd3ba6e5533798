package prober

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func cfgFor(t ProbeType) probeConfig {
	return probeConfig{probeType: t, successThreshold: 1, failureThreshold: 3, period: 10 * time.Second}
}

// running is an observation of a running container "c1" started 10s before
// t0 by a manager started an hour earlier.
func running() observation {
	return observation{
		now:         t0,
		agentStart:  t0.Add(-time.Hour),
		statusKnown: true,
		containerID: "c1",
		running:     true,
		startedAt:   t0.Add(-10 * time.Second),
		startupDone: true,
	}
}

func TestStep(t *testing.T) {
	probed := probeState{containerID: "c1", result: Success, lastResult: Success, run: 1, lastProbe: t0.Add(-10 * time.Second)}
	cases := []struct {
		name  string
		cfg   probeConfig
		state probeState
		obs   func(o *observation)
		want  decision
		next  probeState
	}{{
		name: "no status yet: wait a poll",
		cfg:  cfgFor(Readiness),
		obs:  func(o *observation) { *o = observation{now: t0} },
		want: decision{verdict: wait, at: t0.Add(maxPoll), poll: true},
	}, {
		name: "a poll never exceeds the period",
		cfg:  probeConfig{probeType: Readiness, period: 500 * time.Millisecond},
		obs:  func(o *observation) { *o = observation{now: t0} },
		want: decision{verdict: wait, at: t0.Add(500 * time.Millisecond), poll: true},
	}, {
		name:  "pod finished: stop",
		cfg:   cfgFor(Liveness),
		state: probed,
		obs:   func(o *observation) { o.podFinished = true },
		want:  decision{verdict: stop},
		next:  probed,
	}, {
		name: "no container ID: wait",
		cfg:  cfgFor(Readiness),
		obs:  func(o *observation) { o.containerID, o.running = "", false },
		want: decision{verdict: wait, at: t0.Add(maxPoll), poll: true},
	}, {
		name: "first container: initial readiness Failure published, then probe",
		cfg:  cfgFor(Readiness),
		want: decision{verdict: probeNow, publish: true},
		next: probeState{containerID: "c1", result: Failure, lastProbe: t0},
	}, {
		name: "first container: initial liveness Success",
		cfg:  cfgFor(Liveness),
		want: decision{verdict: probeNow, publish: true},
		next: probeState{containerID: "c1", result: Success, lastProbe: t0},
	}, {
		name: "first container: initial startup Unknown",
		cfg:  cfgFor(Startup),
		want: decision{verdict: probeNow, publish: true},
		next: probeState{containerID: "c1", result: Unknown, lastProbe: t0},
	}, {
		name: "a result cached for the container (berth restarted) is kept",
		cfg:  cfgFor(Readiness),
		obs:  func(o *observation) { o.cached, o.hasCached = Success, true },
		want: decision{verdict: probeNow, publish: true},
		next: probeState{containerID: "c1", result: Success, lastProbe: t0},
	}, {
		name:  "a new container resets everything, drops the old result and lifts the hold",
		cfg:   cfgFor(Liveness),
		state: probeState{containerID: "c0", result: Failure, lastResult: Failure, run: 0, onHold: true, lastProbe: t0.Add(-time.Second)},
		want:  decision{verdict: probeNow, publish: true, drop: "c0"},
		next:  probeState{containerID: "c1", result: Success, lastProbe: t0},
	}, {
		name:  "on hold: no probe until a new container",
		cfg:   cfgFor(Liveness),
		state: probeState{containerID: "c1", result: Failure, lastResult: Failure, onHold: true},
		want:  decision{verdict: wait, at: t0.Add(10 * time.Second)},
		next:  probeState{containerID: "c1", result: Failure, lastResult: Failure, onHold: true},
	}, {
		name:  "not running and will restart: Failure, wait",
		cfg:   cfgFor(Readiness),
		state: probed,
		obs:   func(o *observation) { o.running, o.exited, o.restarts = false, true, true },
		want:  decision{verdict: wait, at: t0.Add(maxPoll), poll: true, publish: true},
		next:  probeState{containerID: "c1", result: Failure, lastResult: Success, run: 1, lastProbe: probed.lastProbe},
	}, {
		name:  "created but not started: Failure, wait",
		cfg:   cfgFor(Liveness),
		state: probed,
		obs:   func(o *observation) { o.running = false },
		want:  decision{verdict: wait, at: t0.Add(maxPoll), poll: true, publish: true},
		next:  probeState{containerID: "c1", result: Failure, lastResult: Success, run: 1, lastProbe: probed.lastProbe},
	}, {
		name:  "not running, already Failure: nothing to publish",
		cfg:   cfgFor(Readiness),
		state: probeState{containerID: "c1", result: Failure},
		obs:   func(o *observation) { o.running = false },
		want:  decision{verdict: wait, at: t0.Add(maxPoll), poll: true},
		next:  probeState{containerID: "c1", result: Failure},
	}, {
		name:  "exited for good: Failure, stop",
		cfg:   cfgFor(Readiness),
		state: probed,
		obs:   func(o *observation) { o.running, o.exited = false, true },
		want:  decision{verdict: stop, publish: true},
		next:  probeState{containerID: "c1", result: Failure, lastResult: Success, run: 1, lastProbe: probed.lastProbe},
	}, {
		name:  "terminating: liveness reports Success and stops",
		cfg:   cfgFor(Liveness),
		state: probeState{containerID: "c1", result: Failure, lastResult: Failure, run: 1},
		obs:   func(o *observation) { o.terminating = true },
		want:  decision{verdict: stop, publish: true},
		next:  probeState{containerID: "c1", result: Success, lastResult: Failure, run: 1},
	}, {
		name:  "terminating: startup reports Success and stops",
		cfg:   cfgFor(Startup),
		state: probeState{containerID: "c1", result: Unknown},
		obs:   func(o *observation) { o.terminating = true },
		want:  decision{verdict: stop, publish: true},
		next:  probeState{containerID: "c1", result: Success},
	}, {
		name:  "terminating: readiness keeps probing",
		cfg:   cfgFor(Readiness),
		state: probeState{containerID: "c1", result: Success},
		obs:   func(o *observation) { o.terminating = true },
		want:  decision{verdict: probeNow},
		next:  probeState{containerID: "c1", result: Success, lastProbe: t0},
	}, {
		name:  "startup already succeeded for this container: hold",
		cfg:   cfgFor(Startup),
		state: probeState{containerID: "c1", result: Success},
		want:  decision{verdict: wait, at: t0.Add(10 * time.Second)},
		next:  probeState{containerID: "c1", result: Success, onHold: true},
	}, {
		name: "gated by a startup probe that has not succeeded: readiness waits at its initial Failure",
		cfg:  probeConfig{probeType: Readiness, successThreshold: 1, failureThreshold: 3, period: 10 * time.Second, gated: true},
		obs:  func(o *observation) { o.startupDone = false },
		want: decision{verdict: wait, at: t0.Add(maxPoll), poll: true, publish: true},
		next: probeState{containerID: "c1", result: Failure},
	}, {
		name: "gate open: liveness probes",
		cfg:  probeConfig{probeType: Liveness, successThreshold: 1, failureThreshold: 3, period: 10 * time.Second, gated: true},
		want: decision{verdict: probeNow, publish: true},
		next: probeState{containerID: "c1", result: Success, lastProbe: t0},
	}, {
		name: "within initialDelaySeconds: wait until it has passed",
		cfg:  probeConfig{probeType: Liveness, successThreshold: 1, failureThreshold: 3, period: 10 * time.Second, initialDelay: 15 * time.Second},
		want: decision{verdict: wait, at: t0.Add(5 * time.Second), publish: true},
		next: probeState{containerID: "c1", result: Success},
	}, {
		name: "initialDelaySeconds just passed: probe",
		cfg:  probeConfig{probeType: Liveness, successThreshold: 1, failureThreshold: 3, period: 10 * time.Second, initialDelay: 10 * time.Second},
		want: decision{verdict: probeNow, publish: true},
		next: probeState{containerID: "c1", result: Success, lastProbe: t0},
	}, {
		name:  "probed recently: wait for the next slot",
		cfg:   cfgFor(Readiness),
		state: probeState{containerID: "c1", result: Success, lastResult: Success, run: 1, lastProbe: t0.Add(-time.Second)},
		want:  decision{verdict: wait, at: slotAtOrAfter(t0.Add(-10*time.Second+phase("c1", 10*time.Second)), 10*time.Second, t0.Add(4*time.Second))},
		next:  probeState{containerID: "c1", result: Success, lastResult: Success, run: 1, lastProbe: t0.Add(-time.Second)},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := running()
			if tc.obs != nil {
				tc.obs(&o)
			}
			next, d := step(tc.cfg, tc.state, o)
			if d != tc.want {
				t.Errorf("decision = %+v, want %+v", d, tc.want)
			}
			if next != tc.next {
				t.Errorf("state = %+v, want %+v", next, tc.next)
			}
		})
	}
}

func TestRecord(t *testing.T) {
	S, F := Success, Failure
	cases := []struct {
		name    string
		cfg     probeConfig
		start   Result // the cached result before the run
		results []Result
		publish []bool // after each result
		want    Result
		onHold  bool
	}{{
		name:    "readiness: one success is enough by default",
		cfg:     cfgFor(Readiness),
		start:   F,
		results: []Result{S, S},
		publish: []bool{true, false},
		want:    S,
	}, {
		name:    "readiness: successThreshold consecutive successes",
		cfg:     probeConfig{probeType: Readiness, successThreshold: 3, failureThreshold: 3},
		start:   F,
		results: []Result{S, S, F, S, S, S},
		publish: []bool{false, false, false, false, false, true},
		want:    S,
	}, {
		name:    "readiness: failureThreshold consecutive failures",
		cfg:     cfgFor(Readiness),
		start:   S,
		results: []Result{F, F, S, F, F, F},
		publish: []bool{false, false, false, false, false, true},
		want:    F,
	}, {
		name:    "readiness failing stays unheld",
		cfg:     probeConfig{probeType: Readiness, successThreshold: 1, failureThreshold: 1},
		start:   S,
		results: []Result{F, F},
		publish: []bool{true, false},
		want:    F,
	}, {
		name:    "liveness: failures below the threshold change nothing",
		cfg:     cfgFor(Liveness),
		start:   S,
		results: []Result{F, F},
		publish: []bool{false, false},
		want:    S,
	}, {
		name:    "liveness: failureThreshold failures, then on hold",
		cfg:     cfgFor(Liveness),
		start:   S,
		results: []Result{F, F, F},
		publish: []bool{false, false, true},
		want:    F,
		onHold:  true,
	}, {
		name:    "startup: success holds (nothing left to probe in this container)",
		cfg:     cfgFor(Startup),
		start:   Unknown,
		results: []Result{F, S},
		publish: []bool{false, true},
		want:    S,
		onHold:  true,
	}, {
		name:    "startup: failureThreshold failures, then on hold",
		cfg:     probeConfig{probeType: Startup, successThreshold: 1, failureThreshold: 2},
		start:   Unknown,
		results: []Result{F, F},
		publish: []bool{false, true},
		want:    F,
		onHold:  true,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := probeState{containerID: "c1", result: tc.start}
			for i, r := range tc.results {
				var publish bool
				s, publish = record(tc.cfg, s, r)
				if publish != tc.publish[i] {
					t.Errorf("result %d (%v): publish = %v, want %v", i, r, publish, tc.publish[i])
				}
			}
			if s.result != tc.want || s.onHold != tc.onHold {
				t.Errorf("result %v onHold %v, want %v %v", s.result, s.onHold, tc.want, tc.onHold)
			}
			if s.onHold && s.run != 0 {
				t.Errorf("run = %d on hold, want 0", s.run)
			}
		})
	}
}

func TestRestartsAfterExit(t *testing.T) {
	always, never, onFailure := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicy("Never"), v1.ContainerRestartPolicy("OnFailure")
	cases := []struct {
		pod       v1.RestartPolicy
		container *v1.ContainerRestartPolicy
		exitCode  int32
		want      bool
	}{
		{"", nil, 0, true},
		{v1.RestartPolicyAlways, nil, 0, true},
		{v1.RestartPolicyNever, nil, 1, false},
		{v1.RestartPolicyOnFailure, nil, 0, false},
		{v1.RestartPolicyOnFailure, nil, 137, true},
		{v1.RestartPolicyNever, &always, 0, true}, // a sidecar
		{v1.RestartPolicyAlways, &never, 1, false},
		{v1.RestartPolicyAlways, &onFailure, 0, false},
	}
	for _, tc := range cases {
		p := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: tc.pod}}
		c := &v1.Container{RestartPolicy: tc.container}
		if got := restartsAfterExit(p, c, tc.exitCode); got != tc.want {
			t.Errorf("pod %q container %v exit %d: restarts %v, want %v", tc.pod, tc.container, tc.exitCode, got, tc.want)
		}
	}
}

func TestConfigFor(t *testing.T) {
	cases := []struct {
		name string
		t    ProbeType
		p    v1.Probe
		gate bool
		want probeConfig
	}{{
		name: "undefaulted probe: the API server's defaults",
		t:    Readiness,
		want: probeConfig{probeType: Readiness, successThreshold: 1, failureThreshold: 3, period: 10 * time.Second},
	}, {
		name: "readiness keeps its successThreshold",
		t:    Readiness,
		p:    v1.Probe{PeriodSeconds: 2, SuccessThreshold: 4, FailureThreshold: 5, InitialDelaySeconds: 7},
		gate: true,
		want: probeConfig{probeType: Readiness, successThreshold: 4, failureThreshold: 5, period: 2 * time.Second, initialDelay: 7 * time.Second, gated: true},
	}, {
		name: "liveness: successThreshold is 1",
		t:    Liveness,
		p:    v1.Probe{SuccessThreshold: 4},
		want: probeConfig{probeType: Liveness, successThreshold: 1, failureThreshold: 3, period: 10 * time.Second},
	}, {
		name: "startup is never gated by itself",
		t:    Startup,
		gate: true,
		want: probeConfig{probeType: Startup, successThreshold: 1, failureThreshold: 3, period: 10 * time.Second},
	}}
	for _, tc := range cases {
		if got := configFor(tc.t, &tc.p, tc.gate); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
