package podworker

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A sleep hook ends with its timeout (for preStop, the grace period left)
// when that comes first, without an error: a preStop sleep of 50 s in a pod
// deleted with a grace period of 30 s lets the container stop at 30 s, as
// the kubelet's conformance spec "reduce GracePeriodSeconds during runtime"
// checks. A sleep shorter than the timeout runs whole.
func TestSleepHookBoundedByTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		seconds int64
		timeout time.Duration
	}{
		{"longer than the timeout", 3600, 50 * time.Millisecond},
		{"zero seconds", 0, time.Hour},
	} {
		h := &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: tc.seconds}}
		done := make(chan error, 1)
		go func() {
			done <- runHandler(context.Background(), nil, nil, h, &v1.Pod{}, &v1.Container{}, "id", "", tc.timeout)
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the sleep hook outlived its timeout by 30 s", tc.name)
		}
	}
}
