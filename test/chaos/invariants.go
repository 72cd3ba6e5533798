package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// WantPod is a pod the node must run.
type WantPod struct {
	Name       string // as berth lists it
	Containers []string
	Widgets    int // devices of the first container
	Gen        int
}

// PodView is one pod of berth's /pods.
type PodView struct {
	Name     string
	UID      string
	Phase    string
	Ready    bool
	Deleting bool
	Reason   string
	// Gen is the pod's chaos-gen label: which generation of its slot it is.
	Gen int
	// Restarts is each container's restart count.
	Restarts map[string]int32
}

// ContainerView is one container as the runtime lists it.
type ContainerView struct {
	ID     string
	PodUID string
	// PodName is the runtime's label: it names the pod even when berth,
	// just restarted, does not list it yet.
	PodName string
	Name    string
	Running bool
	// Devices are the widget IDs the runtime gave the container (the
	// device plugin's environment variable), the truth whatever berth
	// believes.
	Devices []string
}

// SandboxView is one sandbox as the runtime lists it.
type SandboxView struct {
	ID     string
	PodUID string
	Ready  bool
}

// Allocation is one of berth's device allocations (/devices).
type Allocation struct {
	PodUID    string
	Container string
	Devices   []string
}

// Observation is the node seen at one moment: berth's view and the
// runtime's.
type Observation struct {
	Pods        []PodView
	Containers  []ContainerView
	Sandboxes   []SandboxView
	Allocations []Allocation
}

// Violation is one broken promise.
type Violation struct {
	Kind   string // duplicate, restarted, replaced, device-twice, ...
	Pod    string
	Detail string
}

func (v Violation) String() string {
	if v.Pod == "" {
		return v.Kind + ": " + v.Detail
	}
	return v.Kind + " " + v.Pod + ": " + v.Detail
}

// Known is what the harness recorded of a converged pod, to compare the
// next convergence with.
type Known struct {
	UID string
	Gen int
	// IDs are the running container IDs by container name.
	IDs      map[string]string
	Restarts map[string]int32
}

// Baseline is the last converged state, by pod name.
type Baseline map[string]Known

// livePod returns the one pod named name that is not being deleted, or
// false when there is none or more than one.
func livePod(obs Observation, name string) (PodView, int) {
	var found PodView
	n := 0
	for _, p := range obs.Pods {
		if p.Name == name && !p.Deleting {
			found = p
			n++
		}
	}
	return found, n
}

// running returns the runtime's running containers of uid by name.
func running(obs Observation, uid string) map[string][]ContainerView {
	out := map[string][]ContainerView{}
	for _, c := range obs.Containers {
		if c.PodUID == uid && c.Running {
			out[c.Name] = append(out[c.Name], c)
		}
	}
	return out
}

// Converged reports whether every wanted pod runs, ready, with each of its
// containers running exactly once and one ready sandbox, and nothing of any
// other pod still runs. The string says what is still missing.
func Converged(want []WantPod, obs Observation) (bool, string) {
	var missing []string
	uids := map[string]bool{}
	for _, w := range want {
		p, n := livePod(obs, w.Name)
		if n != 1 {
			missing = append(missing, fmt.Sprintf("%s: %d live pods", w.Name, n))
			continue
		}
		uids[p.UID] = true
		if p.Gen != w.Gen {
			missing = append(missing, fmt.Sprintf("%s: generation %d, want %d", w.Name, p.Gen, w.Gen))
			continue
		}
		if p.Phase != "Running" || !p.Ready {
			missing = append(missing, fmt.Sprintf("%s: %s ready=%v %s", w.Name, p.Phase, p.Ready, p.Reason))
			continue
		}
		run := running(obs, p.UID)
		for _, c := range w.Containers {
			if len(run[c]) != 1 {
				missing = append(missing, fmt.Sprintf("%s/%s: %d running", w.Name, c, len(run[c])))
			}
		}
		if n := readySandboxes(obs, p.UID); n != 1 {
			missing = append(missing, fmt.Sprintf("%s: %d ready sandboxes", w.Name, n))
		}
	}
	for _, c := range obs.Containers {
		if c.Running && !uids[c.PodUID] {
			missing = append(missing, fmt.Sprintf("container %s of unwanted pod %s still runs", c.Name, c.PodUID))
		}
	}
	for _, s := range obs.Sandboxes {
		if s.Ready && !uids[s.PodUID] {
			missing = append(missing, fmt.Sprintf("sandbox of unwanted pod %s still ready", s.PodUID))
		}
	}
	return len(missing) == 0, strings.Join(missing, "; ")
}

func readySandboxes(obs Observation, uid string) int {
	n := 0
	for _, s := range obs.Sandboxes {
		if s.PodUID == uid && s.Ready {
			n++
		}
	}
	return n
}

// Always lists what must hold at every moment, converged or not: no two
// running instances of one container of one pod, no device held by two
// running containers, in the runtime or in berth's books.
func Always(obs Observation) []Violation {
	var out []Violation
	seen := map[string]int{}
	for _, c := range obs.Containers {
		if c.Running {
			seen[c.PodUID+"/"+c.Name]++
		}
	}
	for _, k := range sortedKeys(seen) {
		if seen[k] > 1 {
			out = append(out, Violation{Kind: "duplicate", Pod: podName(obs, strings.Split(k, "/")[0]),
				Detail: fmt.Sprintf("container %s runs %d times", k, seen[k])})
		}
	}
	holders := map[string][]string{}
	for _, c := range obs.Containers {
		if !c.Running {
			continue
		}
		for _, d := range c.Devices {
			holders[d] = append(holders[d], podName(obs, c.PodUID)+"/"+c.Name)
		}
	}
	for _, d := range sortedKeys(holders) {
		slices.Sort(holders[d]) // one report for one pair, whatever the listing order
		if len(holders[d]) > 1 {
			out = append(out, Violation{Kind: "device-twice",
				Detail: fmt.Sprintf("widget %s is in running containers %s", d, strings.Join(holders[d], ", "))})
		}
	}
	booked := map[string][]string{}
	for _, a := range obs.Allocations {
		for _, d := range a.Devices {
			booked[d] = append(booked[d], podName(obs, a.PodUID)+"/"+a.Container)
		}
	}
	for _, d := range sortedKeys(booked) {
		slices.Sort(booked[d])
		if len(booked[d]) > 1 {
			out = append(out, Violation{Kind: "device-twice",
				Detail: fmt.Sprintf("berth allocates widget %s to %s", d, strings.Join(booked[d], ", "))})
		}
	}
	return out
}

// Check compares a converged observation with the baseline: a pod whose
// generation did not change keeps its UID, its containers and their restart
// counts, unless the harness says a fault legitimately replaced it; each
// container has the devices it asked for, and berth's books agree with the
// runtime.
func Check(want []WantPod, base Baseline, replaced map[string]bool, obs Observation) []Violation {
	out := Always(obs)
	for _, w := range want {
		p, n := livePod(obs, w.Name)
		if n != 1 {
			continue // Converged says so
		}
		run := running(obs, p.UID)
		if k, ok := base[w.Name]; ok && k.Gen == w.Gen && !replaced[w.Name] {
			out = append(out, compareKnown(w, k, p, run)...)
		}
		out = append(out, checkDevices(w, p, run, obs)...)
	}
	return out
}

func compareKnown(w WantPod, k Known, p PodView, run map[string][]ContainerView) []Violation {
	if p.UID != k.UID {
		return []Violation{{Kind: "replaced", Pod: w.Name, Detail: fmt.Sprintf("UID %s became %s", k.UID, p.UID)}}
	}
	var out []Violation
	for _, c := range w.Containers {
		if len(run[c]) == 1 && k.IDs[c] != "" && run[c][0].ID != k.IDs[c] {
			out = append(out, Violation{Kind: "restarted", Pod: w.Name,
				Detail: fmt.Sprintf("container %s was %s, is %s", c, short(k.IDs[c]), short(run[c][0].ID))})
		}
		if p.Restarts[c] != k.Restarts[c] {
			out = append(out, Violation{Kind: "restarted", Pod: w.Name,
				Detail: fmt.Sprintf("container %s restart count %d became %d", c, k.Restarts[c], p.Restarts[c])})
		}
	}
	return out
}

func checkDevices(w WantPod, p PodView, run map[string][]ContainerView, obs Observation) []Violation {
	var out []Violation
	for i, c := range w.Containers {
		if len(run[c]) != 1 {
			continue
		}
		wantN := 0
		if i == 0 {
			wantN = w.Widgets
		}
		got := run[c][0].Devices
		if len(got) != wantN {
			out = append(out, Violation{Kind: "devices", Pod: w.Name,
				Detail: fmt.Sprintf("container %s has widgets %v, asked for %d", c, got, wantN)})
		}
		if wantN == 0 {
			continue
		}
		books := booked(obs, p.UID, c)
		if !sameSet(books, got) {
			out = append(out, Violation{Kind: "device-books", Pod: w.Name,
				Detail: fmt.Sprintf("container %s holds widgets %v, berth's books say %v", c, got, books)})
		}
	}
	return out
}

func booked(obs Observation, uid, container string) []string {
	var out []string
	for _, a := range obs.Allocations {
		if a.PodUID == uid && a.Container == container {
			out = append(out, a.Devices...)
		}
	}
	return out
}

// Quarantined reports whether berth shows the pod named name as a manifest
// it could not read: a damaged applied pod must stay visible until its owner
// applies or deletes it again.
func Quarantined(obs Observation, name string) bool {
	for _, p := range obs.Pods {
		if p.Name == name && p.Phase == "Failed" && p.Reason == "InvalidManifest" {
			return true
		}
	}
	return false
}

// Record makes the baseline of a converged observation.
func Record(want []WantPod, obs Observation) Baseline {
	base := Baseline{}
	for _, w := range want {
		p, n := livePod(obs, w.Name)
		if n != 1 {
			continue
		}
		k := Known{UID: p.UID, Gen: w.Gen, IDs: map[string]string{}, Restarts: map[string]int32{}}
		run := running(obs, p.UID)
		for _, c := range w.Containers {
			if len(run[c]) == 1 {
				k.IDs[c] = run[c][0].ID
			}
			k.Restarts[c] = p.Restarts[c]
		}
		base[w.Name] = k
	}
	return base
}

func podName(obs Observation, uid string) string {
	for _, p := range obs.Pods {
		if p.UID == uid {
			return p.Name
		}
	}
	for _, c := range obs.Containers {
		if c.PodUID == uid && c.PodName != "" {
			return c.PodName
		}
	}
	return "pod " + uid
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
