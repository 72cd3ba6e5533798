package bench

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// ReactionResult is how fast the agent (berth, or the kubelet in a
// comparison) replaces a container whose process was
// killed: from the kill to the runtime starting the replacement.
type ReactionResult struct {
	Kills   int     `json:"kills"`
	Restart Latency `json:"restart"`
	// The restart in three parts, by the runtime's own timestamps: the
	// kill to the runtime's record of the exit; the exit to the runtime
	// creating the replacement (the agent noticing and deciding, and the
	// runtime's lag in publishing the exit); creating to started (the
	// runtime's create and start).
	Exit           Latency `json:"exit"`
	Decide         Latency `json:"decide"`
	CreateAndStart Latency `json:"create_and_start"`
	// Floor is the same kill with the harness as a perfect agent: it kills
	// the process and at once creates and starts the replacement through
	// the CRI, from the kill to the runtime's start. Each of the agent's
	// kills is followed by one of the floor's, so that both see the
	// machine as it is at the time. On berth's runtime only: the kubelet
	// would remove the harness's pod.
	Floor Latency `json:"floor"`
}

// runReaction kills one container in each of kills pods, one pod at a
// time, so that every kill is its container's first and the crash-loop
// back-off (which starts only after a restart) never delays it.
func runReaction(ctx context.Context, n nodeUnderTest, kills int) (res ReactionResult, err error) {
	res.Kills = kills
	names := make([]string, kills)
	for i := range names {
		names[i] = fmt.Sprintf("react-%03d", i)
		if err := n.writeManifest(names[i]+".yaml", reactionManifest(names[i])); err != nil {
			return res, err
		}
	}
	err = poll(ctx, 5*time.Minute, 200*time.Millisecond, func() (bool, error) {
		starts, err := containerStarts(ctx, n, startupNamespace)
		return err == nil && len(starts) == kills, nil
	})
	if err != nil {
		return res, fmt.Errorf("reaction pods running: %w", err)
	}
	var floor *reactionFloor
	if _, isBerth := n.(*node); isBerth {
		if floor, err = startReactionFloor(ctx, n); err != nil {
			return res, fmt.Errorf("reaction floor: %w", err)
		}
		defer func() {
			if floor != nil { // not removed yet: a kill failed
				err = errors.Join(err, floor.remove(ctx))
			}
		}()
	}
	var took, exit, decide, createStart, floorTook []time.Duration
	for _, name := range names {
		r, err := killAndWait(ctx, n, n.podName(name))
		if err != nil {
			return res, err
		}
		took = append(took, r.started.Sub(r.killed))
		exit = append(exit, r.finished.Sub(r.killed))
		decide = append(decide, r.created.Sub(r.finished))
		createStart = append(createStart, r.started.Sub(r.created))
		if floor == nil {
			continue
		}
		d, err := floor.kill(ctx)
		if err != nil {
			return res, fmt.Errorf("reaction floor: %w", err)
		}
		floorTook = append(floorTook, d)
	}
	res.Restart, res.Exit, res.Decide, res.CreateAndStart = Summarize(took), Summarize(exit), Summarize(decide), Summarize(createStart)
	if floor != nil {
		res.Floor = Summarize(floorTook)
		// Before the manifests: clearing them waits for the runtime to
		// hold no sandbox at all.
		f := floor
		floor = nil
		if err := f.remove(ctx); err != nil {
			return res, fmt.Errorf("reaction floor: %w", err)
		}
	}
	return res, n.clearManifests(ctx, 5*time.Minute)
}

// restart is one kill and its replacement: when the harness killed the
// process, and the runtime's times for the old container's exit and the
// new one's creation and start.
type restart struct {
	killed, finished, created, started time.Time
}

// killAndWait kills pod's container process and waits for the runtime to
// start its replacement. The harness polls for the replacement, but the
// times are the runtime's own, so the polling's pace does not show in them.
func killAndWait(ctx context.Context, n nodeUnderTest, pod string) (restart, error) {
	var r restart
	old, err := runningContainerID(ctx, n, startupNamespace, pod)
	if err != nil {
		return r, err
	}
	pid, err := containerPid(ctx, n, old)
	if err != nil {
		return r, err
	}
	r.killed = time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return r, fmt.Errorf("kill the container of %s (pid %d): %w", pod, pid, err)
	}
	var replacement string
	err = poll(ctx, time.Minute, 5*time.Millisecond, func() (bool, error) {
		id, err := runningContainerID(ctx, n, startupNamespace, pod)
		if err == nil && id != old {
			replacement = id
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return r, fmt.Errorf("no replacement for the container of %s: %w", pod, err)
	}
	st, err := n.criService().ContainerStatus(ctx, replacement)
	if err != nil {
		return r, err
	}
	r.created, r.started = time.Unix(0, st.CreatedAt), time.Unix(0, st.StartedAt)
	if st, err = n.criService().ContainerStatus(ctx, old); err != nil {
		return r, fmt.Errorf("the killed container of %s: %w", pod, err)
	}
	r.finished = time.Unix(0, st.FinishedAt)
	return r, nil
}
