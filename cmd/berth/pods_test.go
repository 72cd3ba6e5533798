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
		want   string
	}{
		{"", `NAMESPACE     NAME      READY   STATUS             RESTARTS   AGE   IP
default       api       0/1     InvalidManifest    0          5s    <none>
default       web       1/1     Running            0          5s    10.88.0.5
kube-system   coredns   0/1     CrashLoopBackOff   12         3h    <none>
`},
		{"wide", `NAMESPACE     NAME      READY   STATUS             RESTARTS   AGE   IP          NODE
default       api       0/1     InvalidManifest    0          5s    <none>      <none>
default       web       1/1     Running            0          5s    10.88.0.5   node-1
kube-system   coredns   0/1     CrashLoopBackOff   12         3h    <none>      <none>
`},
	}
	for _, tt := range tests {
		t.Run(tt.output, func(t *testing.T) {
			var out bytes.Buffer
			if err := printPods(&out, testList(), tt.output, now); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", out.String(), tt.want)
			}
		})
	}
}

func TestPrintPodsStructured(t *testing.T) {
	var out bytes.Buffer
	if err := printPods(&out, testList(), "json", now); err != nil {
		t.Fatal(err)
	}
	var list v1.PodList
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list.Items) != 3 {
		t.Fatalf("json output does not decode to 3 pods: %v", err)
	}
	out.Reset()
	if err := printPods(&out, testList(), "yaml", now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "name: coredns") {
		t.Errorf("yaml output:\n%s", out.String())
	}
}

func TestCheckOutput(t *testing.T) {
	for _, ok := range []string{"", "wide", "json", "yaml"} {
		if err := checkOutput(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	if err := checkOutput("xml"); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("xml: %v", err)
	}
}
