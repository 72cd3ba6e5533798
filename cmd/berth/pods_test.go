package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func testList() *v1.PodList {
	web := pod("app")
	web.Status.ContainerStatuses = []v1.ContainerStatus{status("app", running(), true, 0)}
	web.Status.PodIPs = []v1.PodIP{{IP: "10.88.0.5"}}
	web.Spec.NodeName = "node-1"
	dns := pod("coredns")
	dns.Namespace, dns.Name = "kube-system", "coredns"
	dns.Status.StartTime = ago(3 * time.Hour)
	dns.Status.ContainerStatuses = []v1.ContainerStatus{status("coredns", waiting("CrashLoopBackOff"), false, 12)}
	api := pod("api")
	api.Name = "api"
	api.Status.Phase, api.Status.Reason = v1.PodFailed, "InvalidManifest"
	return &v1.PodList{Items: []v1.Pod{*dns, *web, *api}}
}

func TestPrintPodsTable(t *testing.T) {
	tests := []struct {
		output string
		list   func() *v1.PodList
		want   string
	}{
		{"", testList, `NAMESPACE     NAME      READY   STATUS             RESTARTS   AGE   IP
default       api       0/1     InvalidManifest    0          5s    <none>
default       web       1/1     Running            0          5s    10.88.0.5
kube-system   coredns   0/1     CrashLoopBackOff   12         3h    <none>
`},
		{"wide", wideList, `NAMESPACE     NAME      READY   STATUS             RESTARTS   AGE   IP          NODE     NOMINATED NODE   READINESS GATES
default       api       0/1     InvalidManifest    0          5s    <none>      <none>   <none>           <none>
default       web       1/1     Running            0          5s    10.88.0.5   node-1   <none>           1/2
kube-system   coredns   0/1     CrashLoopBackOff   12         3h    <none>      <none>   node-2           <none>
`},
		{"name", testList, "pod/api\npod/web\npod/coredns\n"},
	}
	for _, tt := range tests {
		t.Run(tt.output, func(t *testing.T) {
			var out bytes.Buffer
			if err := printPods(&out, tt.list(), tt.output, now, palette{}); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", out.String(), tt.want)
			}
		})
	}
}

// wideList has what only -o wide shows: a nominated node, and readiness
// gates of which one is met.
func wideList() *v1.PodList {
	list := testList()
	for i := range list.Items {
		p := &list.Items[i]
		switch p.Name {
		case "web":
			p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}}
			p.Status.Conditions = []v1.PodCondition{
				{Type: "example.com/lb", Status: v1.ConditionTrue},
				{Type: "example.com/dns", Status: v1.ConditionFalse},
			}
		case "coredns":
			p.Status.NominatedNodeName = "node-2"
		}
	}
	return list
}

// TestPrintPodsColor checks the coloured table: each status in its colour,
// and once the colours are taken out, the very same text as without them,
// alignment included.
func TestPrintPodsColor(t *testing.T) {
	for _, output := range []string{"", "wide"} {
		var plain, colored bytes.Buffer
		if err := printPods(&plain, wideList(), output, now, palette{}); err != nil {
			t.Fatal(err)
		}
		if err := printPods(&colored, wideList(), output, now, palette{on: true}); err != nil {
			t.Fatal(err)
		}
		if got := stripANSI(colored.String()); got != plain.String() {
			t.Errorf("-o %q: without its colours the table reads\n%s\nwant\n%s", output, got, plain.String())
		}
		for _, want := range []string{
			"\x1b[39mSTATUS\x1b[0m",
			"\x1b[31mInvalidManifest\x1b[0m",
			"\x1b[32mRunning\x1b[0m",
			"\x1b[31mCrashLoopBackOff\x1b[0m",
		} {
			if !strings.Contains(colored.String(), want) {
				t.Errorf("-o %q: no %q in\n%q", output, want, colored.String())
			}
		}
	}
}

// stripANSI removes SGR sequences.
func stripANSI(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "\x1b[")
		if i < 0 {
			return b.String() + s
		}
		b.WriteString(s[:i])
		j := strings.IndexByte(s[i:], 'm')
		if j < 0 {
			return b.String() + s[i:]
		}
		s = s[i+j+1:]
	}
}

func TestPrintPodsStructured(t *testing.T) {
	var out bytes.Buffer
	if err := printPods(&out, testList(), outputJSON, now, palette{on: true}); err != nil {
		t.Fatal(err)
	}
	var list v1.PodList
	if err := json.Unmarshal(out.Bytes(), &list); err != nil {
		t.Fatalf("json output does not decode: %v\n%s", err, out.String())
	}
	if list.APIVersion != "v1" || list.Kind != "PodList" || len(list.Items) != 3 {
		t.Fatalf("json output is %s %s with %d items, want a v1 PodList of 3", list.APIVersion, list.Kind, len(list.Items))
	}
	for i, want := range []string{"default/api", "default/web", "kube-system/coredns"} {
		p := list.Items[i]
		if p.Namespace+"/"+p.Name != want || p.APIVersion != "v1" || p.Kind != "Pod" {
			t.Errorf("item %d is %s %s %s/%s, want v1 Pod %s", i, p.APIVersion, p.Kind, p.Namespace, p.Name, want)
		}
	}
	if strings.Contains(out.String(), "\x1b") {
		t.Error("structured output must never be coloured")
	}

	out.Reset()
	if err := printPods(&out, testList(), outputYAML, now, palette{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n") ||
		!strings.Contains(out.String(), "\nkind: PodList\n") || !strings.Contains(out.String(), "name: coredns") {
		t.Errorf("yaml output:\n%s", out.String())
	}
}

func TestPodsCommandOutputFlag(t *testing.T) {
	hs := startAPI(t)
	out, err := runBerth(t, "", "pods", "--server", hs.URL, "-o", "name")
	if err != nil || out != "pod/api\npod/web\npod/coredns\n" {
		t.Errorf("pods -o name = %q, %v", out, err)
	}
	_, err = runBerthCoded(t, "pods", "--server", hs.URL, "-o", "xml")
	if err == nil || !strings.Contains(err.Error(), "want wide, json, yaml or name") || exitCode(err) != exitUsage {
		t.Errorf("pods -o xml: %v (exit code %d)", err, exitCode(err))
	}
}
