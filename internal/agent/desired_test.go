package agent

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

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
		maxPods       int
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
			name:          "pods beyond maxPods are rejected, not started",
			next:          []*v1.Pod{pod("a", "1"), pod("b", "2"), pod("c", "3")},
			maxPods:       2,
			start:         []string{"a@1", "b@2"},
			rejectedNames: []string{"c"},
		},
		{
			name:          "a pod pushed over maxPods by a new one is killed",
			prev:          []*v1.Pod{pod("b", "2"), pod("c", "3")},
			next:          []*v1.Pod{pod("a", "1"), pod("b", "2"), pod("c", "3")},
			maxPods:       2,
			start:         []string{"a@1"},
			kill:          []string{"c@3"},
			rejectedNames: []string{"c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.maxPods
			if max == 0 {
				max = 110
			}
			prev := admit(podsource.Snapshot{Pods: tt.prev}, max)
			next := admit(podsource.Snapshot{Pods: tt.next}, max)
			c := diff(prev, next)
			if got := names(c.start); !reflect.DeepEqual(got, tt.start) {
				t.Errorf("start = %v, want %v", got, tt.start)
			}
			if got := names(c.kill); !reflect.DeepEqual(got, tt.kill) {
				t.Errorf("kill = %v, want %v", got, tt.kill)
			}
			var rejected []string
			for _, e := range next {
				if e.rejected != "" {
					rejected = append(rejected, e.pod.Name)
				}
			}
			if !reflect.DeepEqual(rejected, tt.rejectedNames) {
				t.Errorf("rejected = %v, want %v", rejected, tt.rejectedNames)
			}
		})
	}
}

func TestOrphans(t *testing.T) {
	desired := admit(podsource.Snapshot{Pods: []*v1.Pod{pod("a", "1")}}, 110)
	inRuntime := []types.UID{"1", "2", "3"}
	hasWorker := map[types.UID]bool{"3": true}
	got := orphans(desired, inRuntime, func(uid types.UID) bool { return hasWorker[uid] })
	if !reflect.DeepEqual(got, []types.UID{"2"}) {
		t.Errorf("orphans = %v, want [2]: wanted pods and pods with a worker are not orphans", got)
	}
}
