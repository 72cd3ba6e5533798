package podworker

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestPredecessor(t *testing.T) {
	ws := &Workers{deps: Deps{Clock: clocktesting.NewFakeClock(t0)}, workers: map[types.UID]*worker{}}
	add := func(uid types.UID, namespace, name string, terminating bool) *worker {
		w := newWorker(ws, uid, name, namespace)
		w.terminating = terminating
		ws.workers[uid] = w
		return w
	}
	succ := add("new", "default", "web", false)
	if got := ws.predecessor(succ); got != "" {
		t.Errorf("alone: predecessor = %q", got)
	}
	add("other-name", "default", "db", true)
	add("other-namespace", "prod", "web", true)
	running := add("running", "default", "web", false)
	if got := ws.predecessor(succ); got != "" {
		t.Errorf("no terminating pod of its name: predecessor = %q", got)
	}
	running.terminating = true
	if got := ws.predecessor(succ); got != "running" {
		t.Errorf("predecessor = %q, want running", got)
	}
	if got := ws.predecessor(running); got != "" {
		t.Errorf("the terminating pod waits for %q", got)
	}

	// When it is gone, the successor is woken, and only it.
	ws.wakeSuccessorsLocked(running)
	for uid, w := range ws.workers {
		woken := len(w.wakeCh) == 1
		if want := uid == "new"; woken != want {
			t.Errorf("%s woken: %v, want %v", uid, woken, want)
		}
	}
}
