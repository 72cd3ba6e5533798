package hierarchy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/cm"
)

// fakeFS is an in-memory cgroupfs: the hierarchy's logic (what it writes,
// in which order) is tested here; the real writer has its own tests.
type fakeFS struct {
	cgroups map[string]cm.ResourceConfig
	pids    map[string][]int
	usage   map[string]int64
	log     []string
	// immortal pids survive Kill (a process stuck in the kernel).
	immortal map[int]bool
	kills    int
}

func newFakeFS() *fakeFS {
	return &fakeFS{cgroups: map[string]cm.ResourceConfig{}, pids: map[string][]int{}, usage: map[string]int64{}}
}

func (f *fakeFS) Create(path string, cfg cm.ResourceConfig) error {
	f.log = append(f.log, "create "+path)
	f.cgroups[path] = cfg
	return nil
}

func (f *fakeFS) Update(path string, cfg cm.ResourceConfig) error {
	if cfg.Memory != nil && *cfg.Memory >= 0 && f.usage[path] > *cfg.Memory {
		return errors.New("device or resource busy")
	}
	f.log = append(f.log, "update "+path)
	// Like the cgroupfs, an update writes only the fields it sets.
	cur := f.cgroups[path]
	merge(&cur.CPUShares, cfg.CPUShares)
	merge(&cur.CPUQuota, cfg.CPUQuota)
	merge(&cur.CPUPeriod, cfg.CPUPeriod)
	merge(&cur.Memory, cfg.Memory)
	merge(&cur.PidsLimit, cfg.PidsLimit)
	if cfg.HugePageLimit != nil {
		cur.HugePageLimit = cfg.HugePageLimit
	}
	f.cgroups[path] = cur
	return nil
}

func merge[T any](dst **T, src *T) {
	if src != nil {
		*dst = src
	}
}

func (f *fakeFS) Destroy(path string) error {
	if len(f.pids[path]) > 0 {
		return fmt.Errorf("%s has processes: %w", path, unix.EBUSY)
	}
	if _, ok := f.cgroups[path]; ok {
		f.log = append(f.log, "destroy "+path)
	}
	delete(f.cgroups, path)
	return nil
}

func (f *fakeFS) Exists(path string) bool { _, ok := f.cgroups[path]; return ok }

func (f *fakeFS) Children(path string) ([]string, error) {
	var out []string
	for p := range f.cgroups {
		if rest, ok := strings.CutPrefix(p, path+"/"); ok && !strings.Contains(rest, "/") {
			out = append(out, rest)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (f *fakeFS) Pids(path string) ([]int, error) { return f.pids[path], nil }

func (f *fakeFS) Kill(path string) ([]int, error) {
	f.kills++
	found := f.pids[path]
	var left []int
	for _, pid := range found {
		if f.immortal[pid] {
			left = append(left, pid)
		}
	}
	f.pids[path] = left
	return found, nil
}

func (f *fakeFS) MemoryUsage(path string) (int64, error) { return f.usage[path], nil }

const gi = int64(1) << 30

func testPod(uid, name string, req, lim string) *v1.Pod {
	p := &v1.Pod{}
	p.UID, p.Name = types.UID(uid), name
	c := v1.Container{Name: "c"}
	if req != "" {
		c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse(req)}
	}
	if lim != "" {
		c.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse(lim)}
	}
	p.Spec.Containers = []v1.Container{c}
	return p
}

func newTest(t *testing.T) (*Hierarchy, *fakeFS) {
	t.Helper()
	fs := newFakeFS()
	reserve := int64(100)
	h := New(fs, Options{
		Clock:                steppingClock{testingclock.NewFakeClock(time.Unix(0, 0))},
		CgroupRoot:           "/",
		Allocatable:          v1.ResourceList{v1.ResourceCPU: resource.MustParse("3"), v1.ResourceMemory: *resource.NewQuantity(8*gi, resource.BinarySI)},
		EnforcePods:          true,
		MemoryReservePercent: &reserve,
		PodPidsLimit:         -1,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	return h, fs
}

func memory(t *testing.T, fs *fakeFS, path string) int64 {
	t.Helper()
	cfg, ok := fs.cgroups[path]
	if !ok || cfg.Memory == nil {
		t.Fatalf("%s: no memory limit (%v)", path, ok)
	}
	return *cfg.Memory
}

func TestStartCreatesTheTree(t *testing.T) {
	_, fs := newTest(t)
	want := []string{"create /kubepods", "create /kubepods/burstable", "create /kubepods/besteffort"}
	if !reflect.DeepEqual(fs.log, want) {
		t.Fatalf("writes = %v, want %v", fs.log, want)
	}
	if got := memory(t, fs, "/kubepods"); got != 8*gi {
		t.Errorf("kubepods memory = %d, want allocatable", got)
	}
}

// A restart must not loosen the QoS limits of running pods before the pod
// set is known: existing QoS cgroups are left alone by Start, and pod
// changes before SetPods do not touch them.
func TestRestartKeepsQOSValuesUntilPodsAreKnown(t *testing.T) {
	h, fs := newTest(t)
	fs.cgroups["/kubepods/burstable"] = cm.ResourceConfig{Memory: ptr(5 * gi)}
	fs.log = nil
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.EnsurePod(testPod("g", "g", "1Gi", "1Gi")); err != nil {
		t.Fatal(err)
	}
	if got := memory(t, fs, "/kubepods/burstable"); got != 5*gi {
		t.Fatalf("burstable memory changed before the pod set was known: %d", got)
	}
	// The pod set arrives: g counts (its cgroup exists), n does not yet.
	if err := h.SetPods([]*v1.Pod{testPod("g", "g", "1Gi", "1Gi"), testPod("n", "n", "2Gi", "2Gi")}); err != nil {
		t.Fatal(err)
	}
	if got := memory(t, fs, "/kubepods/burstable"); got != 7*gi {
		t.Fatalf("burstable memory = %d, want 7Gi: only pods whose cgroup exists reserve room", got)
	}
}

// The pod's cgroup exists before the QoS cgroups are tightened for it, and
// its removal gives the room back.
func TestPodComesAndGoes(t *testing.T) {
	h, fs := newTest(t)
	if err := h.SetPods(nil); err != nil {
		t.Fatal(err)
	}
	fs.log = nil
	g := testPod("g", "g", "1Gi", "1Gi")
	path, err := h.EnsurePod(g)
	if err != nil || path != "/kubepods/podg" {
		t.Fatalf("EnsurePod = %q, %v", path, err)
	}
	if i, j := slices.Index(fs.log, "create /kubepods/podg"), slices.Index(fs.log, "update /kubepods/burstable"); i < 0 || j < i {
		t.Fatalf("the pod cgroup must exist before the QoS cgroups are tightened: %v", fs.log)
	}
	b := testPod("b", "b", "2Gi", "3Gi")
	if path, err := h.EnsurePod(b); err != nil || path != "/kubepods/burstable/podb" {
		t.Fatalf("EnsurePod = %q, %v", path, err)
	}
	if got := memory(t, fs, "/kubepods/besteffort"); got != 5*gi {
		t.Errorf("besteffort memory = %d, want 8Gi - 1Gi - 2Gi", got)
	}
	if _, err := h.RemovePod("g"); err != nil {
		t.Fatal(err)
	}
	if fs.Exists("/kubepods/podg") {
		t.Error("the pod cgroup is still there")
	}
	if got, want := memory(t, fs, "/kubepods/burstable"), 8*gi; got != want {
		t.Errorf("burstable memory after the guaranteed pod left = %d, want %d", got, want)
	}
	if got, want := memory(t, fs, "/kubepods/besteffort"), 6*gi; got != want {
		t.Errorf("besteffort memory after the guaranteed pod left = %d, want %d", got, want)
	}
}

// steppingClock is a fake clock on which a wait is over as soon as it
// starts: the time it waited passes at once.
type steppingClock struct{ *testingclock.FakeClock }

func (c steppingClock) After(d time.Duration) <-chan time.Time {
	c.Step(d)
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// What is left in a pod cgroup when the pod goes is killed, and the pod
// goes: a straggler must not hold it for ever.
func TestRemovePodKillsStragglers(t *testing.T) {
	h, fs := newTest(t)
	if _, err := h.EnsurePod(testPod("g", "g", "1Gi", "1Gi")); err != nil {
		t.Fatal(err)
	}
	fs.pids["/kubepods/podg"] = []int{42, 43}
	killed, err := h.RemovePod("g")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(killed, []int{42, 43}) {
		t.Errorf("killed %v, want [42 43]", killed)
	}
	if fs.Exists("/kubepods/podg") {
		t.Error("the pod cgroup is still there")
	}
}

// A process that will not die fails the removal after a bounded number of
// rounds, naming the pod; the caller retries later.
func TestRemovePodGivesUpOnAnUnkillableProcess(t *testing.T) {
	h, fs := newTest(t)
	if _, err := h.EnsurePod(testPod("g", "g", "1Gi", "1Gi")); err != nil {
		t.Fatal(err)
	}
	fs.pids["/kubepods/podg"] = []int{42}
	fs.immortal = map[int]bool{42: true}
	killed, err := h.RemovePod("g")
	if err == nil || !strings.Contains(err.Error(), "podg") {
		t.Fatalf("RemovePod = %v, want an error naming the pod", err)
	}
	if !slices.Equal(killed, []int{42}) {
		t.Errorf("killed %v, want [42]", killed)
	}
	if fs.kills != killRounds {
		t.Errorf("%d kills, want %d rounds", fs.kills, killRounds)
	}
}

// A lower limit the kernel refuses (the class uses more) is held at the
// usage instead of failing or OOM-killing.
func TestQOSLimitHeldAtUsage(t *testing.T) {
	h, fs := newTest(t)
	if err := h.SetPods(nil); err != nil {
		t.Fatal(err)
	}
	fs.usage["/kubepods/besteffort"] = 7 * gi
	if _, err := h.EnsurePod(testPod("g", "g", "2Gi", "2Gi")); err != nil {
		t.Fatal(err)
	}
	if got := memory(t, fs, "/kubepods/besteffort"); got != 7*gi {
		t.Errorf("besteffort memory = %d, want held at the 7Gi usage", got)
	}
}

func TestHousekeep(t *testing.T) {
	h, fs := newTest(t)
	for _, p := range []string{"/kubepods/podkeep", "/kubepods/burstable/podgone", "/kubepods/besteffort/podbusy", "/kubepods/burstable/notapod"} {
		fs.cgroups[p] = cm.ResourceConfig{}
	}
	fs.pids["/kubepods/besteffort/podbusy"] = []int{7}
	removed, err := h.Housekeep(func(uid types.UID) bool { return uid == "keep" })
	if err != nil {
		t.Fatal(err)
	}
	// As the kubelet's orphaned pod cgroup cleanup: what is left in the
	// cgroup of a pod that is gone is killed.
	if !reflect.DeepEqual(removed, []types.UID{"gone", "busy"}) {
		t.Fatalf("removed %v, want [gone busy]: kept the wanted pod and what is not a pod cgroup", removed)
	}
}

func ptr[T any](v T) *T { return &v }
