package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/berth-dev/berth/internal/eviction"
)

func TestNodeEndpoints(t *testing.T) {
	src := &fakeSource{
		node: v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
			{Type: v1.NodeDiskPressure, Status: v1.ConditionTrue, Reason: "KubeletHasDiskPressure"},
		}}},
		eviction: eviction.Status{Pressure: []v1.NodeConditionType{v1.NodeDiskPressure}},
		summary:  &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "n1"}},
	}
	hs := httptest.NewServer(newTestServer(src).Handler())
	defer hs.Close()
	base := hs.URL

	var node v1.Node
	getJSON(t, base+"/node", &node)
	if node.Kind != "Node" || len(node.Status.Conditions) != 1 || node.Status.Conditions[0].Reason != "KubeletHasDiskPressure" {
		t.Errorf("/node = %+v", node)
	}
	var ev eviction.Status
	getJSON(t, base+"/node/eviction", &ev)
	if len(ev.Pressure) != 1 || ev.Pressure[0] != v1.NodeDiskPressure {
		t.Errorf("/node/eviction = %+v", ev)
	}
	var sum statsapi.Summary
	getJSON(t, base+"/stats/summary", &sum)
	if sum.Node.NodeName != "n1" {
		t.Errorf("/stats/summary = %+v", sum)
	}

	src.summaryErr = errors.New("statfs failed")
	resp, err := http.Get(base + "/stats/summary")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/stats/summary with a failing provider: %d, want 503", resp.StatusCode)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
