package agent

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/podsource"
)

// podSources are where berth's pods come from: the manifest directory and
// the store of `berth apply` (opened, and its pods read, before anything
// starts), merged into one snapshot; in a cluster, joined with the API
// server's pods, which the cluster node's informer sends to fromAPI. Run
// sends each merged snapshot to out, the sync loop's input, until ctx is
// done, and returns once every source has stopped.
type podSources struct {
	dirPath string
	dir     *podsource.Dir
	store   *podsource.Store
	merge   *podsource.Merge
	log     *slog.Logger
	// fromAPI is nil on a standalone node.
	fromAPI chan podsource.Snapshot
	out     chan podsource.Snapshot
}

func newPodSources(dir, nodeName string, resync time.Duration, store *podsource.Store, inCluster bool,
	clk clock.Clock, log *slog.Logger) *podSources {
	s := &podSources{
		dirPath: dir,
		dir:     podsource.NewDir(dir, nodeName, resync, clk, log),
		store:   store,
		merge:   podsource.NewMerge(store.Dir(), log),
		log:     log,
		out:     make(chan podsource.Snapshot, 1),
	}
	if inCluster {
		s.fromAPI = make(chan podsource.Snapshot, 1)
	}
	return s
}

func (s *podSources) Run(ctx context.Context) {
	var wg sync.WaitGroup
	static := make(chan podsource.Snapshot, 1)
	wg.Go(func() {
		if err := s.dir.Run(ctx, static); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error("manifest source stopped", "dir", s.dirPath, "err", err)
		}
	})
	// The pods of `berth apply` join the static pods in the one snapshot
	// the sync loop reads, once both sources have sent theirs.
	applied := make(chan podsource.Snapshot, 1)
	wg.Go(func() { s.store.Run(ctx, applied) })
	if s.fromAPI == nil {
		wg.Go(func() { s.merge.Run(ctx, static, applied, s.out) })
	} else {
		// The API server's pods join the node's own.
		local := make(chan podsource.Snapshot, 1)
		wg.Go(func() { s.merge.Run(ctx, static, applied, local) })
		wg.Go(func() { podsource.JoinCluster(ctx, local, s.fromAPI, s.out, s.log) })
	}
	wg.Wait()
}
