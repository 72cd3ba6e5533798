package podworker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
)

// nodeAndPodEvents records pod events as recordedEvents does, and node
// events apart.
type nodeAndPodEvents struct {
	recordedEvents
	node []string
}

func (r *nodeAndPodEvents) NodeEvent(eventType, reason, message string) {
	r.node = append(r.node, eventType+" "+reason+" "+message)
}

// Preparing a sandbox gives it the cluster's resolver configuration and
// the pod its FQDN in the cluster domain; the warnings of forming it are
// recorded, on the pod and on the node, when a sandbox is made of it (not
// on every sync); a resolv.conf that cannot be read fails the sandbox.
func TestPrepareSandboxDNS(t *testing.T) {
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\nsearch lan\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const missing = `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	tests := []struct {
		name       string
		deps       Deps
		create     bool
		wantSearch []string
		wantPod    []string
		wantNode   []string
		wantFail   bool
	}{
		{name: "cluster DNS", create: true,
			deps:       Deps{ResolvConf: resolv, ClusterDNS: []string{"10.220.0.10"}, ClusterDomain: "cluster.local"},
			wantSearch: []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local", "lan"}},
		{name: "no cluster DNS, sandbox created", create: true, deps: Deps{ResolvConf: resolv, ClusterDomain: "cluster.local"},
			wantSearch: []string{"lan"},
			wantPod:    []string{`Warning MissingClusterDNS pod: "web_default(u1)". ` + missing},
			wantNode:   []string{"Warning MissingClusterDNS " + missing}},
		{name: "no cluster DNS, sandbox running", deps: Deps{ResolvConf: resolv, ClusterDomain: "cluster.local"},
			wantSearch: []string{"lan"}},
		{name: "unreadable resolv.conf", create: true, deps: Deps{ResolvConf: filepath.Join(dir, "absent")}, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := &nodeAndPodEvents{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			deps := tt.deps
			deps.Events = events
			deps.Clock = testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			deps.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
			w := newWorker(NewWorkers(ctx, deps), "u1", "web", "default")
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
				Spec: v1.PodSpec{DNSPolicy: v1.DNSClusterFirst, Hostname: "web", Subdomain: "sub", SetHostnameAsFQDN: ptrTo(true),
					Containers: []v1.Container{{Name: "app", Image: "busybox"}}}}
			ex := &execution{w: w, pod: pod, plan: Plan{CreateSandbox: tt.create}, st: &container.PodStatus{}, log: deps.Log}
			_, stop := ex.run(ctx, Step{Kind: StepPrepareSandbox})
			if tt.wantFail {
				if !stop || w.syncError == nil || w.syncError.Reason != reasonSandboxFailed {
					t.Fatalf("stop %v, syncError %+v; want %s", stop, w.syncError, reasonSandboxFailed)
				}
				return
			}
			if stop {
				t.Fatalf("stopped: %+v", w.syncError)
			}
			if got := ex.sbCfg.GetDnsConfig().GetSearches(); !slices.Equal(got, tt.wantSearch) {
				t.Errorf("searches %v, want %v", got, tt.wantSearch)
			}
			if tt.deps.ClusterDomain != "" && ex.sbCfg.GetHostname() != "web.sub.default.svc."+tt.deps.ClusterDomain {
				t.Errorf("hostname %q, want the FQDN in the cluster domain", ex.sbCfg.GetHostname())
			}
			if !slices.Equal(events.recordedEvents, tt.wantPod) || !slices.Equal(events.node, tt.wantNode) {
				t.Errorf("pod events %q, node events %q\nwant %q, %q", events.recordedEvents, events.node, tt.wantPod, tt.wantNode)
			}
		})
	}
}
