package eviction

import (
	"context"
	"errors"
	"slices"
	"testing"
)

type recordingGC struct {
	calls *[]string
	err   error
}

func (g recordingGC) DeleteUnusedImages(context.Context) (int64, error) {
	*g.calls = append(*g.calls, reclaimImages)
	return 1, g.err
}

func (g recordingGC) DeleteAllUnusedContainers(context.Context) error {
	*g.calls = append(*g.calls, reclaimContainers)
	return g.err
}

func stepNames(steps []reclaimStep) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.name)
	}
	return out
}

func TestReclaimSteps(t *testing.T) {
	var calls []string
	gc := recordingGC{calls: &calls}
	both := []string{reclaimContainers, reclaimImages}
	for _, tc := range []struct {
		withImageFs bool
		want        map[Signal][]string
	}{
		// One disk: dead containers then unused images, for either name of it.
		{false, map[Signal][]string{
			SignalNodeFsAvailable: both, SignalNodeFsInodesFree: both,
			SignalImageFsAvailable: both, SignalImageFsInodesFree: both,
		}},
		// Images on their own disk: only imagefs pressure frees them.
		{true, map[Signal][]string{
			SignalImageFsAvailable: both, SignalImageFsInodesFree: both,
		}},
	} {
		steps := reclaimSteps(gc, gc, tc.withImageFs)
		for _, s := range Signals() {
			if got := stepNames(steps[s]); !slices.Equal(got, tc.want[s]) {
				t.Errorf("imagefs=%v %s: %v, want %v", tc.withImageFs, s, got, tc.want[s])
			}
		}
	}
	steps := reclaimSteps(gc, gc, false)[SignalNodeFsAvailable]
	for _, s := range steps {
		if err := s.run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(calls, both) {
		t.Errorf("calls %v, want %v", calls, both)
	}
	failing := recordingGC{calls: &calls, err: errors.New("boom")}
	if err := reclaimSteps(failing, nil, false)[SignalNodeFsAvailable][0].run(context.Background()); err == nil {
		t.Error("an image GC error is lost")
	}
}

func TestReclaimStepsWithoutCollectors(t *testing.T) {
	var calls []string
	onlyImages := reclaimSteps(recordingGC{calls: &calls}, nil, false)
	if got := stepNames(onlyImages[SignalImageFsAvailable]); !slices.Equal(got, []string{reclaimImages}) {
		t.Errorf("without container GC: %v", got)
	}
	if got := reclaimSteps(nil, nil, false)[SignalNodeFsAvailable]; len(got) != 0 {
		t.Errorf("without collectors: %v", stepNames(got))
	}
}
