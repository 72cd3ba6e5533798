package agent

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/pleg"
	"github.com/berth-dev/berth/internal/status"
)

func testPod(name string, uid types.UID, image string) *v1.Pod {
	p := &v1.Pod{}
	p.Namespace, p.Name, p.UID = "default", name, uid
	p.Spec.Containers = []v1.Container{{Name: "c", Image: image}}
	return p
}

// Readers see what the loop published, whole, and nothing of its later
// changes until it publishes again.
func TestViewShowsWhatTheLoopPublished(t *testing.T) {
	view := newPodView(status.NewManager(), clocktesting.NewFakeClock(time.Now()), t.TempDir())
	if _, ready := view.wantedImages(); ready || view.ready() {
		t.Fatal("the view is ready before the loop published anything")
	}
	l := &syncLoop{view: view, admitter: testAdmitter(), runtime: map[types.UID]pleg.Event{}}
	waiting := testPod("waiting", "uid-a", "a:1")
	l.desired = desiredSet{
		"default/waiting":  {pod: waiting, preempting: []types.UID{"victim"}},
		"default/rejected": {pod: testPod("rejected", "uid-r", "r:1"), rejected: &admission.Result{Reason: "OutOfcpu", Message: "no"}},
	}
	l.sourceReady = true
	l.runtime["uid-old"] = pleg.Event{UID: "uid-old"}
	l.publish()

	l.desired["default/waiting"].preempting = nil
	delete(l.desired, "default/rejected")
	l.runtime = map[types.UID]pleg.Event{}

	if !view.ready() || !view.inRuntime("uid-old") || !view.wants("uid-a") || view.wants("uid-r") {
		t.Errorf("ready %v, in runtime %v, wants a %v, wants r %v; want true, true, true, false",
			view.ready(), view.inRuntime("uid-old"), view.wants("uid-a"), view.wants("uid-r"))
	}
	pods := view.pods()
	// A rejected pod's status is the Rejecter's, in the status manager.
	if len(pods) != 1 || pods[0].Name != "waiting" || pods[0].Status.Phase != v1.PodPending {
		t.Errorf("pods %+v; want the waiting one Pending", pods)
	}

	l.publishRuntime()
	if view.inRuntime("uid-old") {
		t.Error("a pod gone from the runtime is still in it after publishRuntime")
	}
	if len(view.pods()) != 1 {
		t.Error("publishRuntime changed the published desired pods")
	}
	l.publish()
	if pods := view.pods(); len(pods) != 0 {
		t.Errorf("after publish, pods %+v; want none (the waiting pod now runs, but has no status yet)", pods)
	}
}
