package chaos

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

func fullState(n int) State {
	st := State{Present: make([]bool, n), Applied: make([]bool, n), Saved: map[Target]bool{}, Widgets: true}
	for i := range st.Present {
		st.Present[i] = true
		st.Applied[i] = i%4 == 3
	}
	return st
}

// One seed and one sequence of states give one sequence of faults: what
// makes a printed seed replay.
func TestNextIsDeterministic(t *testing.T) {
	draw := func() []string {
		r := newRand(42)
		var out []string
		for range 50 {
			f, err := Next(r, Full(), fullState(8))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, f.String())
		}
		return out
	}
	a, b := draw(), draw()
	if !slices.Equal(a, b) {
		t.Fatalf("one seed gave two sequences:\n%v\n%v", a, b)
	}
}

// Every fault Next chooses is one the profile allows and the state makes
// possible.
func TestNextStaysInsideProfileAndState(t *testing.T) {
	tests := []struct {
		name    string
		profile Profile
		state   State
		never   []Kind
	}{
		{"smoke kills the adopted containerd, not the started one, when adopted", Smoke(), func() State { s := fullState(6); s.Adopted = true; return s }(),
			[]Kind{KillContainerd}},
		{"full kills the adopted containerd, not the started one, when adopted", Full(), func() State { s := fullState(6); s.Adopted = true; return s }(),
			[]Kind{KillContainerd}},
		{"full kills the started containerd when not adopted", Full(), fullState(6), []Kind{KillAdoptedContainerd}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRand(7)
			for range 500 {
				f, err := Next(r, tt.profile, tt.state)
				if err != nil {
					t.Fatal(err)
				}
				if tt.profile.Weights[f.Kind] == 0 || slices.Contains(tt.never, f.Kind) {
					t.Fatalf("chose %s", f)
				}
				if f.Kind == DamageFile && !slices.Contains(tt.profile.Damages[f.Target], f.Damage) {
					t.Fatalf("chose a damage the profile does not allow: %s", f)
				}
				if f.Kind == DamageFile && f.Damage == Stale && !tt.state.Saved[f.Target] {
					t.Fatalf("chose a stale copy that was never saved: %s", f)
				}
				if f.Kind == DamageFile && f.Target == AppliedPod && !tt.state.Applied[f.Slot] {
					t.Fatalf("damaged the file of slot %d, which is not applied: %s", f.Slot, f)
				}
			}
		})
	}
}

// The smoke profile makes every attack the full one makes but the stale
// device checkpoint, and tolerates no defect but the one left open.
func TestSmokeMakesEveryAttack(t *testing.T) {
	smoke, full := Smoke(), Full()
	for k, w := range full.Weights {
		if w > 0 && smoke.Weights[k] == 0 {
			t.Errorf("smoke never chooses %s", k)
		}
	}
	for target, damages := range full.Damages {
		for _, d := range damages {
			if !slices.Contains(smoke.Damages[target], d) {
				t.Errorf("smoke never makes %s damage to %s", d, target)
			}
		}
	}
	if !smoke.KillRecovery {
		t.Error("smoke never kills the start that meets a damaged file")
	}
	if len(smoke.Tolerated) != 0 {
		t.Errorf("smoke tolerates %v", smoke.Tolerated)
	}
}

func TestNextDamageNeedsTargets(t *testing.T) {
	st := fullState(3) // no applied slot among 0..2
	st.Widgets = false
	p := Profile{Name: "only-applied", Weights: map[Kind]int{DamageFile: 1},
		Damages: map[Target][]Damage{AppliedPod: {Garbage}, DeviceCheckpoint: {Garbage}, ProbeState: {Stale}}}
	if f, err := Next(newRand(1), p, st); err == nil {
		t.Fatalf("chose %s with nothing to damage", f)
	}
	st.Saved[ProbeState] = true
	f, err := Next(newRand(1), p, st)
	if err != nil || f.Target != ProbeState || f.Damage != Stale {
		t.Fatalf("got %s, %v; want a stale probe state", f, err)
	}
}

func TestChurnOps(t *testing.T) {
	st := fullState(10)
	st.Present[4] = false
	r := newRand(3)
	for range 200 {
		ops := churnOps(r, st, 3)
		if len(ops) < 1 || len(ops) > 3 {
			t.Fatalf("%d ops", len(ops))
		}
		for i, op := range ops {
			if i > 0 && ops[i-1].Slot >= op.Slot {
				t.Fatalf("slots not distinct and sorted: %v", ops)
			}
			if op.Slot == 4 && op.Delete {
				t.Fatalf("deleted an absent pod: %v", ops)
			}
		}
	}
}

func TestFaultString(t *testing.T) {
	tests := []struct {
		f    Fault
		want string
	}{
		{Fault{Kind: KillBerthStartup, Delay: 1234e6}, "kill-berth-startup after 1.234s"},
		{Fault{Kind: KillBerthSync, Delay: 5e8, Ops: []ChurnOp{{Slot: 1}, {Slot: 3, Delete: true}}}, "kill-berth-sync [put:1 del:3] after 500ms"},
		{Fault{Kind: DamageFile, Target: AppliedPod, Damage: Garbage, Slot: 7}, "damage-file garbage applied-pod (berth down by kill -9) of slot 7"},
		{Fault{Kind: DamageFile, Target: ProbeState, Damage: Directory, Graceful: true}, "damage-file directory probe-state (berth down by SIGTERM)"},
		{Fault{Kind: KillContainerd}, "kill-containerd"},
		{Fault{Kind: KillAdoptedContainerd, Ops: []ChurnOp{{Slot: 2, Delete: true}}, Delay: 3e6}, "kill-adopted-containerd [del:2] after 3ms"},
		{Fault{Kind: TermBerthStartup, Delay: 2e9}, "term-berth-startup after 2s"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}
