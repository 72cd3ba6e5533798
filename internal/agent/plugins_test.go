package agent

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

type fakePrepared struct {
	mu         sync.Mutex
	pods       []types.UID
	unprepared []types.UID
	failFor    types.UID
	block      chan struct{}
}

func (f *fakePrepared) PodUIDs() []types.UID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pods)
}

func (f *fakePrepared) UnpreparePod(_ context.Context, uid types.UID) error {
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if uid == f.failFor {
		return errors.New("driver hangs")
	}
	f.unprepared = append(f.unprepared, uid)
	f.pods = slices.DeleteFunc(f.pods, func(u types.UID) bool { return u == uid })
	return nil
}

// The janitor unprepares the claims of the pods keep does not keep, one
// pass at a time; a failure leaves the pod for the next pass.
func TestClaimsJanitor(t *testing.T) {
	f := &fakePrepared{pods: []types.UID{"gone", "kept", "stuck"}, failFor: "stuck", block: make(chan struct{})}
	j := &claimsJanitor{dra: f, log: slog.New(slog.DiscardHandler)}
	var jobs sync.WaitGroup
	keep := func(uid types.UID) bool { return uid == "kept" }
	j.collect(context.Background(), &jobs, keep)
	j.collect(context.Background(), &jobs, keep) // a pass runs: nothing more starts
	close(f.block)
	jobs.Wait()
	if !slices.Equal(f.unprepared, []types.UID{"gone"}) {
		t.Fatalf("unprepared %v, want gone once", f.unprepared)
	}
	f.failFor = ""
	j.collect(context.Background(), &jobs, keep)
	jobs.Wait()
	if !slices.Equal(f.unprepared, []types.UID{"gone", "stuck"}) || !slices.Equal(f.PodUIDs(), []types.UID{"kept"}) {
		t.Errorf("unprepared %v, left %v", f.unprepared, f.PodUIDs())
	}
}
