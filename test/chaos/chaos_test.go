package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
	"github.com/berth-dev/berth/internal/hostclean"
)

// TestChaos runs a node of CHAOS_PODS pods through CHAOS_FAULTS faults of
// the CHAOS_PROFILE profile chosen by CHAOS_SEED (or the -chaos.* flags),
// checking the invariants after each. A violation does not stop the run:
// every one is reported at the end, with the seed and the fault history.
func TestChaos(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the chaos test must run as root (it runs containers)")
	}
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos: seed %d, %d faults, %d pods, profile %s (replay: CHAOS_SEED=%d CHAOS_FAULTS=%d CHAOS_PODS=%d CHAOS_PROFILE=%s)",
		s.seed, s.faults, s.pods, s.profile.Name, s.seed, s.faults, s.pods, s.profile.Name)
	h := newHarness(t, s)
	began := time.Now()
	h.run()
	t.Logf("chaos: seed %d: %d faults on %d pods in %s, %d violations", s.seed, h.done, s.pods,
		time.Since(began).Round(time.Second), len(h.violations))
	if len(h.violations) > 0 {
		t.Errorf("chaos seed %d (profile %s, %d pods): %d invariant violations\n\nfault history:\n  %s\n\nviolations:\n  %s",
			s.seed, s.profile.Name, s.pods, len(h.violations),
			strings.Join(h.history, "\n  "), strings.Join(h.violations, "\n  "))
	}
}

// harness carries out faults on a node and keeps what the checks need.
type harness struct {
	t       *testing.T
	s       settings
	rng     *rand.Rand
	n       *node
	slots   []Slot
	present []bool
	// base is the last converged state; replaced names the pods a fault
	// legitimately replaced since.
	base     Baseline
	replaced map[string]bool
	// saved holds each state file as it was one convergence before the
	// last (for Stale); pending is the last one's copy.
	saved, pending map[Target][]byte
	planted        []string // directories a fault put in place of files
	adopted        bool

	step       int
	done       int // faults injected
	history    []string
	violations []string
	seen       map[string]bool
}

func newHarness(t *testing.T, s settings) *harness {
	return &harness{
		t: t, s: s, rng: rand.New(rand.NewPCG(s.seed, s.seed^0x9e3779b97f4a7c15)),
		n: newNode(t), slots: Layout(s.pods), present: make([]bool, s.pods),
		base: Baseline{}, replaced: map[string]bool{},
		saved: map[Target][]byte{}, pending: map[Target][]byte{}, seen: map[string]bool{},
	}
}

func (h *harness) run() {
	h.history = append(h.history, "#0 start the node and every pod")
	if !h.bringUp() {
		return
	}
	if capacity := WidgetCapacity(h.slots, h.s.profile.MaxChurn); capacity > 0 {
		if err := h.n.startPlugin(capacity); err != nil {
			h.t.Fatalf("%v", err)
		}
	}
	for i := range h.slots {
		if err := h.n.putPod(h.slots[i]); err != nil {
			h.t.Fatalf("create pod %s: %v", h.slots[i].Name(), err)
		}
		h.present[i] = true
	}
	h.converge()
	began := time.Now()
	for h.step = 1; h.step <= h.s.faults; h.step++ {
		if h.s.budget > 0 && time.Since(began) > h.s.budget {
			h.t.Logf("chaos: the %s budget is spent after %d faults; tearing down", h.s.budget, h.step-1)
			h.done = h.step - 1
			h.step = h.s.faults + 1
			break
		}
		f, err := Next(h.rng, h.s.profile, h.state())
		if err != nil {
			h.t.Fatal(err)
		}
		h.history = append(h.history, fmt.Sprintf("#%d %s", h.step, f))
		start := time.Now()
		h.done = h.step
		if !h.inject(f) {
			h.t.Logf("fault %d: %s: the node could not be brought back; stopping the run", h.step, f)
			return
		}
		took := h.converge()
		h.t.Logf("fault %d/%d: %s: converged in %s (%s in all)", h.step, h.s.faults, f,
			took.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
	}
	h.history = append(h.history, "#end delete every pod, stop berth, look for leaks")
	h.teardown()
}

// violate records violations of the current step, once each.
func (h *harness) violate(vs ...Violation) {
	for _, v := range vs {
		key := v.String()
		if h.seen[key] {
			continue
		}
		h.seen[key] = true
		if slices.Contains(h.s.profile.Tolerated, v.Kind) {
			h.t.Logf("known defect, tolerated by profile %s: after #%s: %s", h.s.profile.Name, h.stepName(), key)
			continue
		}
		line := fmt.Sprintf("after #%s: %s", h.stepName(), key)
		h.violations = append(h.violations, line)
		h.t.Log("VIOLATION " + line)
	}
}

// stepName is the history's name of the current step.
func (h *harness) stepName() string {
	if h.step > h.s.faults {
		return "end"
	}
	return fmt.Sprint(h.step)
}

func (h *harness) want() []WantPod {
	var out []WantPod
	for i, s := range h.slots {
		if h.present[i] {
			out = append(out, s.Want(nodeName))
		}
	}
	return out
}

func (h *harness) state() State {
	applied := make([]bool, len(h.slots))
	for i, s := range h.slots {
		applied[i] = s.Applied
	}
	saved := map[Target]bool{}
	for t, data := range h.saved {
		saved[t] = data != nil
	}
	return State{Adopted: h.adopted, Present: h.present, Applied: applied, Saved: saved,
		Widgets: WidgetCapacity(h.slots, h.s.profile.MaxChurn) > 0}
}

// bringUp starts berth and waits for its API. A start that fails is a
// violation; the operator's fix (the directories a fault planted removed)
// is applied and the start tried again, up to ten times: a start can fail
// several times in a row and then succeed (issue #19, item 2).
func (h *harness) bringUp() bool {
	var failures []string
	defer func() {
		if len(failures) > 0 {
			h.violate(Violation{Kind: "start-up", Detail: fmt.Sprintf("%d failed starts in a row, the last: %s",
				len(failures), failures[len(failures)-1])})
		}
	}()
	for attempt := 1; attempt <= 10; attempt++ {
		err := h.n.launch()
		if err == nil {
			err = h.n.waitUp(3 * time.Minute)
		}
		if err == nil {
			h.adopted = h.n.adopted()
			return true
		}
		failures = append(failures, err.Error())
		h.t.Logf("start %d failed: %v", attempt, err)
		h.n.kill9()
		h.repair()
		time.Sleep(2 * time.Second)
	}
	return false
}

// repair removes what a fault planted that berth cannot be expected to
// get past without an operator.
func (h *harness) repair() {
	for _, p := range h.planted {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			h.history = append(h.history, fmt.Sprintf("#%s repair: removed the directory %s", h.stepName(), p))
			_ = os.RemoveAll(p)
		}
	}
	h.planted = nil
}

// converge waits until the node converged, checks the invariants, and makes
// the result the new baseline. It returns how long convergence took.
func (h *harness) converge() time.Duration {
	began := time.Now()
	want := h.want()
	deadline := began.Add(3*time.Minute + 4*time.Second*time.Duration(len(h.slots)))
	var obs Observation
	var last string
	// Converged must still hold settle later: a berth that just came
	// back shows what it adopted before its first sync has acted on it.
	const settle = 3 * time.Second
	var since time.Time
	for {
		o, err := h.n.observe()
		if err == nil {
			obs = o
			h.violate(Always(obs)...)
			ok, desc := Converged(want, obs)
			if ok && since.IsZero() {
				since = time.Now()
			}
			if ok && time.Since(since) >= settle {
				break
			}
			if !ok {
				since = time.Time{}
			}
			last = desc
		} else {
			since = time.Time{}
			last = err.Error()
		}
		if time.Now().After(deadline) {
			h.violate(Violation{Kind: "not-converged", Detail: fmt.Sprintf("after %s: %s", time.Since(began).Round(time.Second), last)})
			break
		}
		time.Sleep(time.Second)
	}
	took := time.Since(began)
	h.violate(Check(want, h.base, h.replaced, obs)...)
	h.base = Record(want, obs)
	h.replaced = map[string]bool{}
	for _, t := range []Target{ProbeState, DeviceCheckpoint} {
		h.saved[t] = h.pending[t]
		if data, err := os.ReadFile(h.targetPath(t, 0, "")); err == nil {
			h.pending[t] = data
		}
	}
	return took
}

// inject carries out f and brings the node back; false when it could not.
func (h *harness) inject(f Fault) bool {
	n := h.n
	switch f.Kind {
	case KillBerthStartup:
		n.kill9()
		if err := n.launch(); err != nil {
			h.t.Fatal(err)
		}
		time.Sleep(f.Delay)
		if !n.running() {
			h.violate(Violation{Kind: "start-up", Detail: "berth exited by itself during start-up: " + n.lastError()})
		}
		n.kill9()
	case TermBerthStartup:
		h.termDuringStartup(f)
	case KillBerthSync:
		h.applyOps(f.Ops)
		time.Sleep(f.Delay)
		n.kill9()
	case KillBerthShutdown:
		if n.running() && n.cmd.Process.Pid > 1 {
			_ = syscall.Kill(n.cmd.Process.Pid, syscall.SIGTERM)
		}
		time.Sleep(f.Delay)
		n.kill9()
	case KillContainerd, KillAdoptedContainerd:
		h.applyOps(f.Ops)
		time.Sleep(f.Delay)
		return h.killContainerd()
	case KillBothDown:
		n.kill9()
		if pid := n.containerdPid(); pid > 1 && hostclean.Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid)
		}
	case DamageFile:
		return h.damage(f)
	case Churn:
		h.applyOps(f.Ops)
		return true
	}
	return h.bringUp()
}

// termDuringStartup starts berth and stops it with SIGTERM f.Delay later;
// a containerd this berth started must be gone once it exited.
func (h *harness) termDuringStartup(f Fault) {
	n := h.n
	n.kill9()
	// Only a containerd this berth launched is its to stop.
	adoptable := len(containerdsUnder(n.root)) > 0
	if err := n.launch(); err != nil {
		h.t.Fatal(err)
	}
	time.Sleep(f.Delay)
	if !n.running() {
		h.violate(Violation{Kind: "start-up", Detail: "berth exited by itself during start-up: " + n.lastError()})
		return
	}
	n.signal(syscall.SIGTERM, time.Minute)
	if left := containerdsUnder(n.root); !adoptable && len(left) > 0 {
		h.violate(Violation{Kind: "runtime-left", Detail: fmt.Sprintf(
			"berth launched containerd, was stopped by SIGTERM %s into its start, and left it running: %s", f.Delay, left[0])})
	}
}

// containerdsUnder lists the containerd daemons (not shims) of root.
func containerdsUnder(root string) []string {
	var out []string
	for _, p := range processesUnder(root) {
		if _, cmdline, _ := strings.Cut(p, ": "); strings.Contains(cmdline, "containerd --config") {
			out = append(out, p)
		}
	}
	return out
}

// killContainerd kills the running berth's containerd and waits for berth
// to start another (the README promises it, started or adopted); when it does not, that is a violation, and berth is
// restarted (the operator's fix) so that the run goes on.
func (h *harness) killContainerd() bool {
	n := h.n
	old := n.containerdPid()
	if old <= 1 || !hostclean.Alive(old) {
		h.violate(Violation{Kind: "runtime", Detail: "no containerd was running before the kill"})
		return true
	}
	_ = syscall.Kill(old, syscall.SIGKILL)
	waitGone(old)
	// berth restarts the containerd it started within a second; a minute
	// is generous on a loaded machine.
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if pid := n.containerdPid(); pid > 1 && pid != old && hostclean.Alive(pid) {
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	how := "started"
	if h.adopted {
		how = "adopted"
	}
	h.violate(Violation{Kind: "runtime", Detail: fmt.Sprintf("berth %s containerd (pid %d); it was killed and none ran a minute later", how, old)})
	h.history = append(h.history, fmt.Sprintf("#%s repair: restarted berth", h.stepName()))
	n.kill9()
	return h.bringUp()
}

func waitGone(pid int) {
	for deadline := time.Now().Add(30 * time.Second); hostclean.Alive(pid) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
}

// applyOps carries out churn operations. Every put is a new generation of
// the slot, so a re-created or replaced pod has a new UID.
func (h *harness) applyOps(ops []ChurnOp) {
	for _, op := range ops {
		s := &h.slots[op.Slot]
		if op.Delete {
			if err := h.n.deletePod(*s); err != nil {
				h.violate(Violation{Kind: "churn", Pod: s.Name(), Detail: err.Error()})
				continue
			}
			h.present[op.Slot] = false
			continue
		}
		s.Gen++
		if err := h.n.putPod(*s); err != nil {
			h.violate(Violation{Kind: "churn", Pod: s.Name(), Detail: err.Error()})
			continue
		}
		h.present[op.Slot] = true
	}
}

// damage stops berth, damages a state file and starts berth again. A
// damaged applied pod is applied again, as its owner would.
func (h *harness) damage(f Fault) bool {
	n := h.n
	if f.Graceful {
		n.signal(syscall.SIGTERM, time.Minute)
	} else {
		n.kill9()
	}
	uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", h.rng.Uint32(), h.rng.Uint64()&0xffffffffffff)
	path := h.targetPath(f.Target, f.Slot, uid)
	if err := h.damageFile(f, path, uid); err != nil {
		h.t.Fatalf("damage %s: %v", path, err)
	}
	if f.KillRecovery {
		if err := n.launch(); err != nil {
			h.t.Fatal(err)
		}
		time.Sleep(f.Delay)
		n.kill9()
	}
	if !h.bringUp() {
		return false
	}
	if f.Target == AppliedPod {
		s := h.slots[f.Slot]
		h.waitQuarantined(s.FullName(nodeName))
		if err := n.putPod(s); err != nil {
			h.violate(Violation{Kind: "re-apply", Pod: s.Name(), Detail: err.Error()})
		}
		h.replaced[s.FullName(nodeName)] = true
	}
	return true
}

// waitQuarantined waits for berth to show name as an unreadable manifest.
func (h *harness) waitQuarantined(name string) {
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		obs, err := h.n.observe()
		if err == nil && Quarantined(obs, name) {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprint(obs.Pods)
		}
	}
	h.violate(Violation{Kind: "quarantine-lost", Pod: name,
		Detail: "its damaged file shows nowhere in /pods a minute after start: " + last})
}

func (h *harness) damageFile(f Fault, path, uid string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	switch f.Damage {
	case Directory:
		if err := os.RemoveAll(path); err != nil {
			return err
		}
		h.planted = append(h.planted, path)
		return os.Mkdir(path, 0o700)
	case Stale:
		return os.WriteFile(path, h.saved[f.Target], 0o600)
	}
	data, err := os.ReadFile(path)
	if err != nil && f.Target == TerminalRecord {
		// No pod is ever evicted here: the record is made up, then damaged.
		data = []byte(fmt.Sprintf(`{"uid":%q,"status":{"phase":"Failed","reason":"Evicted"}}`, uid))
	}
	out, err := DamageBytes(h.rng, f.Damage, data)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// targetPath is where berth keeps target; slot and uid name the applied
// pod and the planted terminal record.
func (h *harness) targetPath(t Target, slot int, uid string) string {
	switch t {
	case ProbeState:
		return filepath.Join(h.n.root, "probes", "state.json")
	case DeviceCheckpoint:
		return filepath.Join(h.n.devicePlugins, checkpoint.FileName)
	case TerminalRecord:
		return filepath.Join(h.n.root, "terminal-pods", uid+".json")
	}
	return filepath.Join(h.n.root, "local-pods", "default_"+h.slots[slot].Name()+".json")
}

// teardown deletes every pod, waits until the runtime has nothing of them,
// stops berth and its containerd, and reports what is left as leaks.
func (h *harness) teardown() {
	if !h.n.running() && !h.bringUp() {
		return
	}
	for i, s := range h.slots {
		if h.present[i] {
			if err := h.n.deletePod(s); err != nil {
				h.violate(Violation{Kind: "teardown", Pod: s.Name(), Detail: err.Error()})
			}
			h.present[i] = false
		}
	}
	deadline := time.Now().Add(3*time.Minute + 2*time.Second*time.Duration(len(h.slots)))
	var last string
	for {
		obs, err := h.n.observe()
		if err == nil {
			h.violate(Always(obs)...)
			if len(obs.Containers) == 0 && len(obs.Sandboxes) == 0 && len(obs.Pods) == 0 {
				break
			}
			last = fmt.Sprintf("%d pods, %d containers, %d sandboxes", len(obs.Pods), len(obs.Containers), len(obs.Sandboxes))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			h.violate(Violation{Kind: "leak", Detail: "after deleting every pod: " + last})
			break
		}
		time.Sleep(time.Second)
	}
	if h.n.plugin != nil {
		h.n.plugin.Stop()
		h.n.plugin = nil
	}
	h.n.signal(syscall.SIGTERM, time.Minute)
	// berth stops the containerd it manages, launched or adopted; one it
	// could not identify is the harness's to stop, and is no leak.
	h.n.stopContainerd()
	h.violate(h.n.leftovers().Violations()...)
}
