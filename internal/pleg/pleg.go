// Package pleg is the pod lifecycle event generator: it notices when the
// runtime state of a pod changes and tells the sync loop which pod to look
// at. It relists the runtime periodically, which works with any CRI runtime,
// and relists at once when the runtime pushes an event (containerd's task
// events), so a container exit reaches its pod worker in milliseconds.
package pleg

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/container"
)

// After a runtime event the PLEG relists followUps more times, 20, 80, 320
// and 1,280 ms later: containerd's CRI plugin applies a task event after
// containerd publishes it, so the relist the event triggers may still see
// the old state. (Exits do not wait for this: the runtime service shows
// them from the event itself.)
const followUps = 4

func followUpDelay(step int) time.Duration { return 20 * time.Millisecond << (2 * step) }

// eventRelistGap is the least time between two relists that events caused:
// stopping many pods at once makes several events per pod, and a relist
// per event would list every pod's sandboxes and containers hundreds of
// times a second, costing the runtime what the pods need. Events within
// the gap fold into one relist at its end. (Only exits, OOM kills and
// deletions ask for a relist: a task's creation and start are a worker's
// own steps. When they asked too, 50 pods starting at once on 2 cores made
// a relist every 20 ms, 5-7 of each pod's 6-9 ListContainers and
// ListPodSandbox calls, for changes their workers had read already.)
//
// While events keep coming in a burst (burstEvents within burstWindow), the
// gap from the last event's relist doubles, up to maxEventRelistGap. An event
// after a quiet gap (a container that exits, the kill of the reaction
// benchmark) relists at once, or at least eventRelistGap after the last
// follow-up, and starts the gap afresh. A container's restart is no burst:
// its exit, its old task's deletion, the new one's creation and start come
// within 20 ms of each other, and when two such events close together
// widened the gap, the reaction benchmark's exit to replacement created
// went from 45 to 104 ms (from 163 when follow-ups counted as events too).
const (
	eventRelistGap    = 20 * time.Millisecond
	maxEventRelistGap = 200 * time.Millisecond
	burstEvents       = 10
	burstWindow       = 250 * time.Millisecond
)

// recentEvents remembers when the last burstEvents events came.
type recentEvents struct {
	at   [burstEvents]time.Time
	next int
}

func (r *recentEvents) add(now time.Time) {
	r.at[r.next] = now
	r.next = (r.next + 1) % burstEvents
}

// burst tells whether the last burstEvents events came within
// burstWindow before now.
func (r *recentEvents) burst(now time.Time) bool {
	oldest := r.at[r.next]
	return !oldest.IsZero() && now.Sub(oldest) < burstWindow
}

// nextEventGap is the gap after an event relist: doubled (up to the
// maximum) in a burst, the least one otherwise.
func nextEventGap(gap time.Duration, burst bool) time.Duration {
	if !burst {
		return eventRelistGap
	}
	return min(2*gap, maxEventRelistGap)
}

// RelistThreshold is how long the relist may fail before berth reports itself
// unhealthy, as the kubelet's PLEG health check does.
const RelistThreshold = 3 * time.Minute

// Lister is the slice of the CRI the relist needs.
type Lister interface {
	ListPodSandboxes(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// Event says that the runtime state of one pod changed.
type Event struct {
	UID       types.UID
	Name      string
	Namespace string
	// Gone is true when the runtime no longer has any sandbox or container
	// of the pod.
	Gone bool
}

// PodRecord is one pod as the last relist saw it.
type PodRecord struct {
	Name, Namespace string
	// fingerprint is the sorted list of object IDs and states: any change in
	// it is an event.
	fingerprint string
}

// PLEG relists the runtime and emits an Event per changed pod.
type PLEG struct {
	lister  Lister
	period  time.Duration
	clk     clock.WithTicker
	log     *slog.Logger
	trigger chan struct{}

	metrics *Metrics

	// seeded is what Seed listed: Run starts from it. Set before Run only.
	seeded map[types.UID]PodRecord

	mu         sync.Mutex
	recent     recentEvents // the events Trigger counted
	lastRelist time.Time
	started    time.Time
	last       Relist
}

// Relist is what one relist of the runtime saw: berth's sandboxes and every
// container. The slices are never modified once listed.
type Relist struct {
	Sandboxes  []*runtimeapi.PodSandbox
	Containers []*runtimeapi.Container
	// At is when the relist began: the state is at least that recent.
	At time.Time
}

// Changes is what a relist shows of one pod that differs from a status of
// it: the sandboxes and containers to read again, being new or in another
// state, and those the runtime no longer has.
type Changes struct {
	Sandboxes      []string
	Containers     []ContainerRef
	GoneSandboxes  []string
	GoneContainers []string
}

// ContainerRef names a container and the sandbox it is in.
type ContainerRef struct{ ID, SandboxID string }

// None tells whether the relist showed the pod as the status has it.
func (c Changes) None() bool {
	return len(c.Sandboxes)+len(c.Containers)+len(c.GoneSandboxes)+len(c.GoneContainers) == 0
}

// Changes compares the relist with st, the status of one pod: the same
// sandboxes, each ready or not, and the same containers in the pod's
// sandboxes, each in the same state. Where there are none, st is as current
// as the relist as far as the PLEG can tell, and a worker may sync on it
// without reading the runtime again; where there are some, it need read
// only those. The kubelet's workers read the status the PLEG's relist
// keeps, refreshed only for the pods whose states changed, in the same way.
func (r Relist) Changes(st *container.PodStatus) Changes {
	var ch Changes
	ready := map[string]bool{} // the pod's sandboxes in the relist
	for _, sb := range r.Sandboxes {
		if types.UID(sb.GetLabels()[container.LabelPodUID]) == st.UID {
			ready[sb.GetId()] = sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY
		}
	}
	had := make(map[string]bool, len(st.Sandboxes))
	for _, sb := range st.Sandboxes {
		had[sb.ID] = true
		switch listed, ok := ready[sb.ID]; {
		case !ok:
			ch.GoneSandboxes = append(ch.GoneSandboxes, sb.ID)
		case listed != sb.Ready:
			ch.Sandboxes = append(ch.Sandboxes, sb.ID)
		}
	}
	for _, sb := range r.Sandboxes {
		if _, ours := ready[sb.GetId()]; ours && !had[sb.GetId()] {
			ch.Sandboxes = append(ch.Sandboxes, sb.GetId())
		}
	}
	states := make(map[string]container.State, len(st.Containers))
	for _, c := range st.Containers {
		states[c.ID] = c.State
	}
	listed := map[string]bool{}
	for _, c := range r.Containers {
		if _, ours := ready[c.GetPodSandboxId()]; !ours {
			continue
		}
		listed[c.GetId()] = true
		if s, ok := states[c.GetId()]; !ok || s != container.StateOf(c.GetState()) {
			ch.Containers = append(ch.Containers, ContainerRef{ID: c.GetId(), SandboxID: c.GetPodSandboxId()})
		}
	}
	for _, c := range st.Containers {
		if !listed[c.ID] {
			ch.GoneContainers = append(ch.GoneContainers, c.ID)
		}
	}
	return ch
}

// New returns a PLEG that relists every period.
func New(l Lister, period time.Duration, clk clock.WithTicker, log *slog.Logger, opts ...Option) *PLEG {
	p := &PLEG{lister: l, period: period, clk: clk, log: log, trigger: make(chan struct{}, 1)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// LastRelist returns what the last successful relist saw (zero before the
// first): readers such as the metrics get the runtime's state without a
// call to the runtime of their own.
func (p *PLEG) LastRelist() Relist {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Trigger asks for a relist as soon as possible: one per runtime event,
// counted for the burst. It never blocks.
func (p *PLEG) Trigger() {
	p.mu.Lock()
	p.recent.add(p.clk.Now())
	p.mu.Unlock()
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// inBurst tells whether the runtime's events come in a burst now.
func (p *PLEG) inBurst() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recent.burst(p.clk.Now())
}

// Healthy returns an error when no relist has completed for RelistThreshold.
func (p *PLEG) Healthy() error {
	p.mu.Lock()
	last := p.lastRelist
	if last.IsZero() {
		last = p.started
	}
	p.mu.Unlock()
	if last.IsZero() {
		return nil
	}
	if since := p.clk.Since(last); since > RelistThreshold {
		return fmt.Errorf("relist has not completed for %s (threshold %s)", since.Round(time.Second), RelistThreshold)
	}
	return nil
}

// Seed lists the runtime once, before Run, and returns an event per pod it
// holds; Run then reports only what changes from there. It lets berth know
// which pods are already running before it decides about any (admission
// never checks a pod twice, even across a restart of berth).
func (p *PLEG) Seed(ctx context.Context) ([]Event, error) {
	current, err := p.relist(ctx)
	if err != nil {
		return nil, err
	}
	p.seeded = current
	p.relisted()
	return Diff(nil, current), nil
}

// relisted records that a relist completed, for Healthy and the metrics.
func (p *PLEG) relisted() {
	now := p.clk.Now()
	p.mu.Lock()
	p.lastRelist = now
	p.mu.Unlock()
	p.metrics.seen(now)
}

// Run relists until ctx is done, sending events to out.
func (p *PLEG) Run(ctx context.Context, out chan<- Event) {
	p.mu.Lock()
	p.started = p.clk.Now()
	p.mu.Unlock()
	known := p.seeded
	if known == nil {
		known = map[types.UID]PodRecord{}
	}
	ticker := p.clk.NewTicker(p.period)
	defer ticker.Stop()
	// After a trigger, step walks through followUps; followUps = idle.
	step := followUps
	var followUp clock.Timer
	var followUpC <-chan time.Time
	arm := func() {
		if followUp != nil {
			followUp.Stop()
		}
		followUp, followUpC = nil, nil
		if step < followUps {
			followUp = p.clk.NewTimer(followUpDelay(step))
			followUpC = followUp.C()
		}
	}
	defer func() {
		if followUp != nil {
			followUp.Stop()
		}
	}()
	// Zero until an event causes a relist: lastEventRelist is the last
	// relist an event or a follow-up caused, lastTriggered an event's.
	var lastEventRelist, lastTriggered time.Time
	gap := eventRelistGap
	for {
		if current, err := p.relist(ctx); err != nil {
			p.log.Warn("relist failed", "err", err)
		} else {
			for _, ev := range Diff(known, current) {
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
			known = current
			p.relisted()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-p.trigger:
			burst := p.inBurst()
			wait := eventRelistGap - p.clk.Since(lastEventRelist)
			if burst {
				wait = max(wait, gap-p.clk.Since(lastTriggered))
			}
			if !lastEventRelist.IsZero() && wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-p.clk.After(wait):
				}
				// Triggers that came meanwhile are this relist's too.
				select {
				case <-p.trigger:
				default:
				}
			}
			gap = nextEventGap(gap, burst)
			step = 0
			arm()
			lastEventRelist, lastTriggered = p.clk.Now(), p.clk.Now()
		case <-followUpC:
			step++
			arm()
			lastEventRelist = p.clk.Now()
		}
	}
}

func (p *PLEG) relist(ctx context.Context) (map[types.UID]PodRecord, error) {
	start := p.clk.Now()
	defer func() { p.metrics.observeRelist(p.clk.Since(start)) }()
	sandboxes, err := p.lister.ListPodSandboxes(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{container.LabelManagedBy: "true"},
	})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	ctrs, err := p.lister.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	p.mu.Lock()
	p.last = Relist{Sandboxes: sandboxes, Containers: ctrs, At: start}
	p.mu.Unlock()
	return Group(sandboxes, ctrs), nil
}

// Group folds a relist into one record per pod UID. Containers count only
// when their sandbox is one of berth's.
func Group(sandboxes []*runtimeapi.PodSandbox, ctrs []*runtimeapi.Container) map[types.UID]PodRecord {
	parts := map[types.UID][]string{}
	recs := map[types.UID]PodRecord{}
	ours := map[string]types.UID{}
	for _, sb := range sandboxes {
		uid := types.UID(sb.Labels[container.LabelPodUID])
		if uid == "" {
			continue
		}
		ours[sb.Id] = uid
		recs[uid] = PodRecord{Name: sb.Labels[container.LabelPodName], Namespace: sb.Labels[container.LabelPodNamespace]}
		parts[uid] = append(parts[uid], "s:"+sb.Id+":"+sb.State.String())
	}
	for _, c := range ctrs {
		uid, ok := ours[c.PodSandboxId]
		if !ok {
			continue
		}
		parts[uid] = append(parts[uid], "c:"+c.Id+":"+c.State.String())
	}
	for uid, p := range parts {
		sort.Strings(p)
		r := recs[uid]
		r.fingerprint = strings.Join(p, ",")
		recs[uid] = r
	}
	return recs
}

// Diff returns an event for every pod whose record changed, appeared or
// disappeared between two relists, in UID order.
func Diff(old, cur map[types.UID]PodRecord) []Event {
	var evs []Event
	for uid, r := range cur {
		if o, ok := old[uid]; !ok || o.fingerprint != r.fingerprint {
			evs = append(evs, Event{UID: uid, Name: r.Name, Namespace: r.Namespace})
		}
	}
	for uid, r := range old {
		if _, ok := cur[uid]; !ok {
			evs = append(evs, Event{UID: uid, Name: r.Name, Namespace: r.Namespace, Gone: true})
		}
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].UID < evs[j].UID })
	return evs
}
