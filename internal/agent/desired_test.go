package agent

import (
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/podsource"
)

func pod(name, uid string) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = name, "default", types.UID(uid)
	return p
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"@"+string(p.UID))
	}
	return out
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name          string
		prev, next    []*v1.Pod
		wait          []string // names waiting for their victims
		start, kill   []string
		rejectedNames []string
	}{
		{
			name:  "first snapshot starts everything",
			next:  []*v1.Pod{pod("a", "1"), pod("b", "2")},
			start: []string{"a@1", "b@2"},
		},
		{
			name: "same snapshot changes nothing",
			prev: []*v1.Pod{pod("a", "1")},
			next: []*v1.Pod{pod("a", "1")},
		},
		{
			name:  "an edited manifest is a kill and a start",
			prev:  []*v1.Pod{pod("a", "1"), pod("b", "2")},
			next:  []*v1.Pod{pod("a", "1"), pod("b", "3")},
			start: []string{"b@3"},
			kill:  []string{"b@2"},
		},
		{
			name: "a deleted manifest is a kill",
			prev: []*v1.Pod{pod("a", "1"), pod("b", "2")},
			next: []*v1.Pod{pod("a", "1")},
			kill: []string{"b@2"},
		},
		{
			name:  "a pod waiting for the pods it preempts is not started",
			next:  []*v1.Pod{pod("a", "1"), pod("crit", "2")},
			wait:  []string{"crit"},
			start: []string{"a@1"},
		},
		{
			name:          "a rejected pod is neither started nor killed",
			prev:          []*v1.Pod{pod("a", "1")},
			next:          []*v1.Pod{pod("a", "1"), pod("b", "2")},
			rejectedNames: []string{"b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := desiredFrom(podsource.Snapshot{Pods: tt.prev}, nil)
			next := desiredFrom(podsource.Snapshot{Pods: tt.next}, prev)
			for _, e := range next {
				if slices.Contains(tt.rejectedNames, e.pod.Name) {
					e.rejected = &admission.Result{Reason: "OutOfcpu"}
				}
				if slices.Contains(tt.wait, e.pod.Name) {
					e.preempting = []types.UID{"victim"}
				}
			}
			c := diff(prev, next)
			if got := names(c.start); !reflect.DeepEqual(got, tt.start) {
				t.Errorf("start = %v, want %v", got, tt.start)
			}
			if got := names(c.kill); !reflect.DeepEqual(got, tt.kill) {
				t.Errorf("kill = %v, want %v", got, tt.kill)
			}
		})
	}
}

func TestOrphans(t *testing.T) {
	desired := desiredFrom(podsource.Snapshot{Pods: []*v1.Pod{pod("a", "1")}}, nil)
	inRuntime := []types.UID{"1", "2", "3"}
	hasWorker := map[types.UID]bool{"3": true}
	got := orphans(desired, inRuntime, func(uid types.UID) bool { return hasWorker[uid] })
	if !reflect.DeepEqual(got, []types.UID{"2"}) {
		t.Errorf("orphans = %v, want [2]: wanted pods and pods with a worker are not orphans", got)
	}
}

func TestDesiredFromKeepsDecisions(t *testing.T) {
	prev := desiredFrom(podsource.Snapshot{Pods: []*v1.Pod{pod("a", "1"), pod("b", "2")}}, nil)
	prev["default/a"].rejected = &admission.Result{Reason: "OutOfcpu"}
	prev["default/b"].rejected = &admission.Result{Reason: "OutOfcpu"}
	next := desiredFrom(podsource.Snapshot{Pods: []*v1.Pod{pod("a", "1"), pod("b", "3")}}, prev)
	if next["default/a"].rejected == nil {
		t.Error("the same pod (same UID) lost its rejection: a pod is admitted once")
	}
	if next["default/b"].rejected != nil {
		t.Error("an edited pod (new UID) kept the old one's rejection")
	}
}

// A pod of the API server keeps its UID: a new spec or labels is an
// update, a status alone is nothing, and a deletion is a kill that carries
// the deletion's grace period.
func TestDiffAPIServerPods(t *testing.T) {
	old := pod("web", "u1")
	old.ResourceVersion = "1"
	statusOnly := old.DeepCopy()
	statusOnly.ResourceVersion, statusOnly.Status.Phase = "2", v1.PodRunning
	relabelled := old.DeepCopy()
	relabelled.ResourceVersion, relabelled.Labels = "3", map[string]string{"tier": "front"}
	deleted := old.DeepCopy()
	deleted.ResourceVersion = "4"
	now, grace := metav1.Now(), int64(5)
	deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &now, &grace

	set := func(p *v1.Pod) desiredSet { return desiredSet{key(p): {pod: p}} }
	if c := diff(set(old), set(statusOnly)); len(c.update)+len(c.kill)+len(c.start) != 0 {
		t.Errorf("a status change made %+v", c)
	}
	if c := diff(set(old), set(relabelled)); len(c.update) != 1 || c.update[0] != relabelled || len(c.kill) != 0 {
		t.Errorf("new labels: %+v", c)
	}
	c := diff(set(old), set(deleted))
	if len(c.kill) != 1 || c.kill[0] != deleted || len(c.update) != 0 {
		t.Fatalf("deletion: %+v", c)
	}
	if *c.kill[0].DeletionGracePeriodSeconds != 5 {
		t.Errorf("the kill does not carry the deletion's grace period")
	}
}
