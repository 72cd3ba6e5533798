package podsource

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestSnapshotEqual(t *testing.T) {
	pod := func(name string, uid types.UID) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: uid}}
	}
	broken := ManifestError{Path: "/m/a.yaml", Err: errors.New("kind: Required value")}
	base := Snapshot{Pods: []*v1.Pod{pod("a", "1"), pod("b", "2")}, Errors: []ManifestError{broken}}
	for _, tc := range []struct {
		name  string
		other Snapshot
		want  bool
	}{
		{"same", Snapshot{Pods: []*v1.Pod{pod("a", "1"), pod("b", "2")}, Errors: []ManifestError{broken}}, true},
		{"new UID", Snapshot{Pods: []*v1.Pod{pod("a", "1"), pod("b", "3")}, Errors: []ManifestError{broken}}, false},
		{"pod gone", Snapshot{Pods: []*v1.Pod{pod("a", "1")}, Errors: []ManifestError{broken}}, false},
		{"error fixed", Snapshot{Pods: []*v1.Pod{pod("a", "1"), pod("b", "2")}}, false},
		{"other error", Snapshot{Pods: []*v1.Pod{pod("a", "1"), pod("b", "2")}, Errors: []ManifestError{{Path: "/m/a.yaml", Err: errors.New("kind: Unsupported value")}}}, false},
	} {
		if got := base.Equal(tc.other); got != tc.want {
			t.Errorf("%s: Equal = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestManifestError(t *testing.T) {
	inner := field.Required(field.NewPath("spec", "containers"), "")
	for _, tc := range []struct {
		e    ManifestError
		want string
	}{
		{ManifestError{Path: "/m/a.yaml", Line: 3, Err: FieldErrors{inner}}, "/m/a.yaml: spec.containers: Required value"},
		{ManifestError{Path: "/m/a.yaml", Index: 2, Line: 30, Err: FieldErrors{inner}}, "/m/a.yaml:30: spec.containers: Required value"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		var fe *field.Error
		if !errors.As(tc.e, &fe) || fe != inner {
			t.Errorf("errors.As(%v) did not find the field error", tc.e)
		}
	}
}

// A status change is no news to the node unless it is the condition of a
// readiness gate, which someone else sets and which decides Ready.
func TestSameContent(t *testing.T) {
	base := &v1.Pod{}
	base.ResourceVersion = "1"
	base.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	with := func(change func(*v1.Pod)) *v1.Pod {
		p := base.DeepCopy()
		p.ResourceVersion = "2"
		change(p)
		return p
	}
	for _, tc := range []struct {
		name string
		next *v1.Pod
		same bool
	}{
		{"same version", base.DeepCopy(), true},
		{"berth's own status", with(func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }), true},
		{"another condition", with(func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: "other", Status: v1.ConditionTrue}}
		}), true},
		{"a gate's condition", with(func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionTrue}}
		}), false},
		{"a label", with(func(p *v1.Pod) { p.Labels = map[string]string{"a": "b"} }), false},
		{"the spec", with(func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = new(int64) }), false},
	} {
		if got := SameContent(base, tc.next); got != tc.same {
			t.Errorf("%s: SameContent = %v, want %v", tc.name, got, tc.same)
		}
	}
}
