package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/podworker"
)

// messagePreempted is the kubelet's status message of a preempted pod.
const messagePreempted = "Preempted in order to admit critical pod"

// The bounds of killing a victim, the kubelet's killPodNow: the grace
// period and half as much again, at least minKillTimeout; then berth says
// so and tries again.
const (
	minKillTimeout    = 10 * time.Second
	retryKillVictim   = time.Second
	defaultPodGrace   = int64(v1.DefaultTerminationGracePeriodSeconds)
	podDeletedRecheck = time.Second
)

// newPreemptionsMetric is the kubelet's preemption counter, labelled with
// the first resource the preempting pod lacked.
func newPreemptionsMetric(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "kubelet",
		Name:      "preemptions",
		Help:      "Cumulative number of pod preemptions by preemption resource",
	}, []string{"preemption_signal"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("register preemption metrics: %w", err)
	}
	return c, nil
}

// startPreemption kills the victims of job in the background, in order,
// and hands job back to the sync loop once all have stopped: the critical
// pod starts then, not before.
func (l *syncLoop) startPreemption(ctx context.Context, job preemption) {
	names := make([]string, len(job.victims))
	for i, v := range job.victims {
		names[i] = key(v)
	}
	l.preemptions.WithLabelValues(string(job.signal)).Inc()
	l.log.Info("preempting pods to admit a critical pod", "pod", key(job.pod), "victims", names)
	l.events.Event(job.pod, v1.EventTypeNormal, reasonPreempting,
		fmt.Sprintf("Preempting %s to make room for this critical pod", strings.Join(names, ", ")))
	l.jobs.Go(func() {
		for _, v := range job.victims {
			l.killVictim(ctx, v)
		}
		select {
		case l.preempted <- job:
		case <-ctx.Done():
		}
	})
}

// victimWorkers is what killing a victim needs of the pod workers.
type victimWorkers interface {
	Evict(ctx context.Context, uid types.UID, grace int64, st v1.PodStatus) error
	Has(uid types.UID) bool
}

// victimKiller stops preempted pods.
type victimKiller struct {
	workers victimWorkers
	clk     clock.Clock
	events  podworker.EventRecorder
	log     *slog.Logger
}

func (l *syncLoop) killVictim(ctx context.Context, victim *v1.Pod) {
	victimKiller{workers: l.workers, clk: l.clk, events: l.events, log: l.log}.kill(ctx, victim)
}

// kill stops a preempted pod for good and returns once it has, or when ctx
// is done. A kill that fails or overruns is reported and tried again: a
// victim never stays half-preempted (kubernetes#92906).
func (k victimKiller) kill(ctx context.Context, victim *v1.Pod) {
	log := k.log.With("pod", key(victim), "uid", victim.UID)
	k.events.Event(victim, v1.EventTypeWarning, reasonPreempting, messagePreempted)
	grace := defaultPodGrace
	if g := victim.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	st := preemptedStatus(k.clk.Now())
	for attempt := 1; ; attempt++ {
		kctx, cancel := context.WithTimeout(ctx, killTimeout(grace))
		err := k.workers.Evict(kctx, victim.UID, grace, st)
		cancel()
		switch {
		case err == nil:
			log.Info("preempted pod stopped")
			return
		case ctx.Err() != nil:
			return
		case errors.Is(err, podworker.ErrNoPod):
			return
		case errors.Is(err, podworker.ErrPodDeleted):
			// Its deletion frees what the preemption needs; wait for it.
			if !k.workers.Has(victim.UID) || !sleep(ctx, k.clk, podDeletedRecheck) {
				return
			}
			continue
		}
		log.Warn("stopping a preempted pod failed; will retry", "attempt", attempt, "err", err)
		k.events.Event(victim, v1.EventTypeWarning, reasonFailedKillPod,
			fmt.Sprintf("error killing pod: %v (attempt %d); retrying", err, attempt))
		if !sleep(ctx, k.clk, retryKillVictim) {
			return
		}
	}
}

// reasonFailedKillPod is the kubelet's event reason for a kill that failed.
const reasonFailedKillPod = "FailedKillPod"

// killTimeout is how long killing a pod with grace seconds may take.
func killTimeout(grace int64) time.Duration {
	return max(time.Duration(grace+grace/2)*time.Second, minKillTimeout)
}

// preemptedStatus is the kubelet's status of a preempted pod.
func preemptedStatus(now time.Time) v1.PodStatus {
	return v1.PodStatus{
		Phase:   v1.PodFailed,
		Reason:  reasonPreempting,
		Message: messagePreempted,
		Conditions: []v1.PodCondition{{
			Type:               v1.DisruptionTarget,
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonTerminationByKubelet,
			Message:            messagePreempted,
			LastTransitionTime: metav1.NewTime(now),
		}},
	}
}

// finishPreemption starts the critical pod whose victims have stopped, if
// it is still wanted.
func (l *syncLoop) finishPreemption(job preemption) {
	l.mu.Lock()
	l.admitter.preempted(job.victims)
	e := l.desired[key(job.pod)]
	start := e != nil && e.pod.UID == job.pod.UID && len(e.preempting) > 0
	if start {
		e.preempting = nil
	}
	l.mu.Unlock()
	if start {
		l.log.Info("preempted pods stopped; starting the critical pod", "pod", key(job.pod), "uid", job.pod.UID)
		l.workers.Update(job.pod)
	}
}

// sleep waits d on clk; false if ctx ended first.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
