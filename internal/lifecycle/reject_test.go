package lifecycle

import (
	"io"
	"log/slog"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type statuses map[string]v1.PodStatus

func (s statuses) Set(pod *v1.Pod, st v1.PodStatus) { s[pod.Name] = st }

type events []string

func (e *events) Event(pod *v1.Pod, eventType, reason, message string) {
	*e = append(*e, pod.Name+" "+eventType+" "+reason+": "+message)
}

func TestRejecter(t *testing.T) {
	st, ev := statuses{}, &events{}
	r := Rejecter{Status: st, Events: ev, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "1"}}
	r.Reject(pod, "OutOfcpu", "Node didn't have enough resource: cpu")
	want := v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu", Message: "Pod was rejected: Node didn't have enough resource: cpu"}
	if got := st["p"]; got.Phase != want.Phase || got.Reason != want.Reason || got.Message != want.Message {
		t.Errorf("status %+v, want %+v", got, want)
	}
	if len(*ev) != 1 || (*ev)[0] != "p Warning OutOfcpu: Node didn't have enough resource: cpu" {
		t.Errorf("events %v", *ev)
	}
	// Without a recorder, only the status.
	Rejecter{Status: st, Log: r.Log}.Reject(pod, "Evicted", "pressure")
	if st["p"].Reason != "Evicted" {
		t.Errorf("status %+v, want Evicted", st["p"])
	}
}
