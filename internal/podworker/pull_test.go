package podworker

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestDecidePull(t *testing.T) {
	for _, tc := range []struct {
		policy  v1.PullPolicy
		present bool
		want    pullAction
	}{
		{v1.PullAlways, true, pull},
		{v1.PullAlways, false, pull},
		{v1.PullIfNotPresent, true, usePresent},
		{v1.PullIfNotPresent, false, pull},
		{v1.PullNever, true, usePresent},
		{v1.PullNever, false, refuse},
	} {
		if got := decidePull(tc.policy, tc.present); got != tc.want {
			t.Errorf("decidePull(%s, present=%v) = %v, want %v", tc.policy, tc.present, got, tc.want)
		}
	}
}

func TestSlots(t *testing.T) {
	if newSlots(0) != nil {
		t.Error("0 must mean no bound")
	}
	var none slots
	if err := none.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	none.release()

	one := newSlots(1)
	if err := one.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A second pull waits for the first: it gives up with its context.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := one.acquire(ctx); err == nil {
		t.Fatal("a second pull got a slot while serialized")
	}
	one.release()
	if err := one.acquire(context.Background()); err != nil {
		t.Fatalf("after release: %v", err)
	}
}
