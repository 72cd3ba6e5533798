package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// followPod is pod default/web with one container app (or an init
// container setup) in the given state, under a restart policy.
func followPod(policy v1.RestartPolicy, phase v1.PodPhase, cs *v1.ContainerStatus, init bool) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.PodSpec{
			RestartPolicy:  policy,
			InitContainers: []v1.Container{{Name: "setup"}},
			Containers:     []v1.Container{{Name: "app"}},
		},
		Status: v1.PodStatus{Phase: phase},
	}
	if cs != nil {
		if init {
			cs.Name = "setup"
			p.Status.InitContainerStatuses = []v1.ContainerStatus{*cs}
		} else {
			cs.Name = "app"
			p.Status.ContainerStatuses = []v1.ContainerStatus{*cs}
		}
	}
	return p
}

func runningAs(id string) *v1.ContainerStatus {
	return &v1.ContainerStatus{ContainerID: id, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func exitedAs(id string, code int32) *v1.ContainerStatus {
	return &v1.ContainerStatus{ContainerID: id, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: id, ExitCode: code}}}
}

func backingOffAs(lastID string) *v1.ContainerStatus {
	return &v1.ContainerStatus{
		State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: lastID, ExitCode: 1}},
	}
}

func TestNextInstance(t *testing.T) {
	const c1, c2 = "containerd://c1", "containerd://c2"
	always, onFailure, never := v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever
	deleting := followPod(always, v1.PodRunning, runningAs(c2), false)
	deleting.DeletionTimestamp = &metav1.Time{}
	sidecar := followPod(always, v1.PodRunning, exitedAs(c1, 0), true)
	restartAlways := v1.ContainerRestartPolicyAlways
	sidecar.Spec.InitContainers[0].RestartPolicy = &restartAlways
	tests := []struct {
		name      string
		pod       *v1.Pod
		container string
		wantStep  followStep
		wantID    string
	}{
		{name: "pod gone", pod: nil, wantStep: followDone},
		{name: "pod being deleted", pod: deleting, wantStep: followDone},
		{name: "status still shows the ended instance running", pod: followPod(always, v1.PodRunning, runningAs(c1), false), wantStep: followWait},
		{name: "exited, will restart", pod: followPod(always, v1.PodRunning, exitedAs(c1, 0), false), wantStep: followWait},
		{name: "waiting to restart", pod: followPod(always, v1.PodRunning, backingOffAs(c1), false), wantStep: followWait},
		{name: "restarted", pod: followPod(always, v1.PodRunning, runningAs(c2), false), wantStep: followStream, wantID: c2},
		{name: "restarted and exited already", pod: followPod(always, v1.PodRunning, exitedAs(c2, 1), false), wantStep: followStream, wantID: c2},
		{name: "restarted and crashed, now waiting", pod: followPod(always, v1.PodRunning, backingOffAs(c2), false), wantStep: followStream, wantID: c2},
		{name: "a last instance ran before the pod ended", pod: followPod(onFailure, v1.PodSucceeded, exitedAs(c2, 0), false), wantStep: followStream, wantID: c2},
		{name: "restart policy Never", pod: followPod(never, v1.PodRunning, exitedAs(c1, 1), false), wantStep: followDone},
		{name: "OnFailure, failed", pod: followPod(onFailure, v1.PodRunning, exitedAs(c1, 2), false), wantStep: followWait},
		{name: "OnFailure, succeeded", pod: followPod(onFailure, v1.PodRunning, exitedAs(c1, 0), false), wantStep: followDone},
		{name: "pod succeeded", pod: followPod(always, v1.PodSucceeded, exitedAs(c1, 0), false), wantStep: followDone},
		{name: "pod failed", pod: followPod(always, v1.PodFailed, runningAs(c1), false), wantStep: followDone},
		{name: "not created yet", pod: followPod(always, v1.PodPending, nil, false), wantStep: followWait},
		{name: "init container done: never again", container: "setup", pod: followPod(always, v1.PodRunning, exitedAs(c1, 0), true), wantStep: followDone},
		{name: "init container failed: again", container: "setup", pod: followPod(always, v1.PodPending, exitedAs(c1, 1), true), wantStep: followWait},
		{name: "sidecar: always again", container: "setup", pod: sidecar, wantStep: followWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			container := tt.container
			if container == "" {
				container = "app"
			}
			step, id := nextInstance(tt.pod, container, c1)
			if step != tt.wantStep || id != tt.wantID {
				t.Errorf("got %v %q, want %v %q", step, id, tt.wantStep, tt.wantID)
			}
		})
	}
}

// scriptedAPI answers /pods from a script, one pod state per call (the
// last one for good), and streams "log of <instance>" for the instance
// the latest pod state shows. The first state is the one berth logs saw
// before it started to follow.
type scriptedAPI struct {
	states  []*v1.Pod
	podsErr error
	calls   int
	queries []logQuery
}

func (a *scriptedAPI) current() *v1.Pod {
	return a.states[min(max(a.calls, 1), len(a.states))-1]
}

func (a *scriptedAPI) pods(context.Context) (*v1.PodList, error) {
	if a.podsErr != nil {
		return nil, a.podsErr
	}
	a.calls = max(a.calls, 1) + 1
	list := &v1.PodList{}
	if p := a.current(); p != nil {
		list.Items = append(list.Items, *p)
	}
	return list, nil
}

func (a *scriptedAPI) containerLogs(_ context.Context, w io.Writer, _, _, container string, q logQuery) error {
	a.queries = append(a.queries, q)
	cs, _ := containerStatus(a.current(), container)
	_, err := fmt.Fprintf(w, "log of %s\n", shownInstance(cs))
	return err
}

// manualTicks is a clock whose tickers tick only when the test sends on
// ticks: a send returns once the follower waits, so no test sleeps.
type manualTicks struct {
	*clocktesting.FakeClock
	ticks chan time.Time
}

func (m manualTicks) NewTicker(time.Duration) clock.Ticker { return chanTicker(m.ticks) }

type chanTicker chan time.Time

func (t chanTicker) C() <-chan time.Time { return t }
func (chanTicker) Stop()                 {}

// runFollow runs follow, ticking until it returns.
func runFollow(t *testing.T, ctx context.Context, api logAPI, q logQuery, pod *v1.Pod) (string, int, error) {
	t.Helper()
	clk := manualTicks{FakeClock: clocktesting.NewFakeClock(time.Now()), ticks: make(chan time.Time)}
	f := &logFollower{api: api, clock: clk, interval: followPollInterval}
	var out strings.Builder
	done := make(chan error, 1)
	go func() { done <- f.follow(ctx, &out, "default", "web", "app", q, pod) }()
	ticks := 0
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-done:
			return out.String(), ticks, err
		case clk.ticks <- time.Time{}:
			ticks++
		case <-deadline:
			t.Fatal("follow did not return within 10s")
		}
	}
}

// The log of each instance in turn, until the pod ends.
func TestFollowAcrossRestarts(t *testing.T) {
	const c1, c2, c3 = "containerd://c1", "containerd://c2", "containerd://c3"
	always := v1.RestartPolicyAlways
	api := &scriptedAPI{states: []*v1.Pod{
		followPod(always, v1.PodRunning, runningAs(c1), false),     // before the first stream
		followPod(always, v1.PodRunning, runningAs(c1), false),     // c1 ended; the status lags
		followPod(always, v1.PodRunning, backingOffAs(c1), false),  // waiting to restart
		followPod(always, v1.PodRunning, runningAs(c2), false),     // c2: stream it
		followPod(always, v1.PodRunning, exitedAs(c2, 1), false),   // c2 ended
		followPod(always, v1.PodRunning, exitedAs(c3, 0), false),   // c3 ran and ended between two looks
		followPod(always, v1.PodSucceeded, exitedAs(c3, 0), false), // the pod ended
	}}
	out, ticks, err := runFollow(t, context.Background(), api, logQuery{follow: true, tailLines: 10}, api.states[0])
	if err != nil {
		t.Fatal(err)
	}
	want := "log of " + c1 + "\nlog of " + c2 + "\nlog of " + c3 + "\n"
	if out != want {
		t.Errorf("printed\n%s\nwant\n%s", out, want)
	}
	// After each stream the pod is looked at at once, then on each tick.
	if api.calls != len(api.states) || ticks != 3 {
		t.Errorf("looked at the pod %d times with %d ticks, want %d and 3", api.calls, ticks, len(api.states))
	}
	// --tail applies to the first instance; the next ones print whole.
	if len(api.queries) != 3 || api.queries[0].tailLines != 10 || api.queries[1].tailLines != -1 || api.queries[2].tailLines != -1 {
		t.Errorf("queries %+v", api.queries)
	}
}

func TestFollowEnds(t *testing.T) {
	const c1 = "containerd://c1"
	t.Run("no restart coming", func(t *testing.T) {
		api := &scriptedAPI{states: []*v1.Pod{followPod(v1.RestartPolicyNever, v1.PodRunning, exitedAs(c1, 0), false)}}
		out, _, err := runFollow(t, context.Background(), api, logQuery{follow: true, tailLines: -1}, api.states[0])
		if err != nil || out != "log of "+c1+"\n" || len(api.queries) != 1 {
			t.Errorf("got %q, %v after %d streams", out, err, len(api.queries))
		}
	})
	t.Run("pod gone", func(t *testing.T) {
		api := &scriptedAPI{states: []*v1.Pod{followPod(v1.RestartPolicyAlways, v1.PodRunning, runningAs(c1), false), nil}}
		_, _, err := runFollow(t, context.Background(), api, logQuery{follow: true, tailLines: -1}, api.states[0])
		if err != nil {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("interrupted while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		api := &scriptedAPI{states: []*v1.Pod{followPod(v1.RestartPolicyAlways, v1.PodRunning, runningAs(c1), false)}}
		cancel() // the stream was cut by the interrupt; the wait ends at once
		_, _, err := runFollow(t, ctx, api, logQuery{follow: true, tailLines: -1}, api.states[0])
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled (which berth logs keeps quiet)", err)
		}
	})
	t.Run("the API fails", func(t *testing.T) {
		api := &scriptedAPI{states: []*v1.Pod{followPod(v1.RestartPolicyAlways, v1.PodRunning, runningAs(c1), false)}, podsErr: errors.New("cannot reach berth")}
		_, _, err := runFollow(t, context.Background(), api, logQuery{follow: true, tailLines: -1}, api.states[0])
		if err == nil || err.Error() != "cannot reach berth" {
			t.Errorf("err = %v", err)
		}
	})
}
