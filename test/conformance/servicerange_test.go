package conformance

import (
	"strings"
	"testing"
)

func TestServiceRejectRules(t *testing.T) {
	r := serviceReject{comment: "berth-conformance x"}
	got := r.rejectRules()
	want := []string{
		"-d 10.0.0.0/24 -m comment --comment berth-conformance x -p tcp -j REJECT --reject-with tcp-reset",
		"-d 10.0.0.0/24 -m comment --comment berth-conformance x -j REJECT --reject-with icmp-port-unreachable",
	}
	if len(got) != len(want) {
		t.Fatalf("rules = %q", got)
	}
	for i := range want {
		if s := strings.Join(got[i], " "); s != want[i] {
			t.Errorf("rule %d = %q, want %q", i, s, want[i])
		}
	}
}
