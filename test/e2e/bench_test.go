package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// benchPods is how many pods one round starts: the yardstick.
const benchPods = 20

// BenchmarkStartPods measures the time from dropping benchPods manifests
// into the manifest directory to all of them Running (berth), next to the
// time the same runtime needs for the same pods through direct CRI calls,
// one at a time and all at once. Run with:
//
//	make build && BERTH_BIN=$PWD/bin go test ./test/e2e -run '^$' -bench StartPods -benchtime 3x
func BenchmarkStartPods(b *testing.B) {
	n := startNode(b)
	for _, hostNetwork := range []bool{true, false} {
		net := "bridge"
		if hostNetwork {
			net = "hostnet"
		}
		b.Run("berth/"+net, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				startedAt := time.Now()
				for p := 0; p < benchPods; p++ {
					n.writeManifest(fmt.Sprintf("bench-%02d.yaml", p), benchManifest(fmt.Sprintf("bench-%02d", p), hostNetwork))
				}
				waitFor(b, 5*time.Minute, "all bench pods running", func() (bool, string) {
					running := 0
					for _, p := range n.pods() {
						if strings.HasPrefix(p.Name, "bench-") && p.Status.Phase == v1.PodRunning && podReady(&p) {
							running++
						}
					}
					return running == benchPods, fmt.Sprintf("%d running", running)
				})
				total += time.Since(startedAt)
				b.StopTimer()
				for p := 0; p < benchPods; p++ {
					n.removeManifest(fmt.Sprintf("bench-%02d.yaml", p))
				}
				waitFor(b, 5*time.Minute, "bench pods removed", func() (bool, string) {
					sbs, err := n.cri.ListPodSandboxes(context.Background(), nil)
					return err == nil && len(sbs) == 0, fmt.Sprintf("%d sandboxes", len(sbs))
				})
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/20pods")
		})
		for _, parallel := range []bool{false, true} {
			mode := "serial"
			if parallel {
				mode = "parallel"
			}
			b.Run("cri-direct/"+net+"/"+mode, func(b *testing.B) {
				var total time.Duration
				defer func() { b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/20pods") }()
				for i := 0; i < b.N; i++ {
					startedAt := time.Now()
					ids := runDirect(b, n, hostNetwork, parallel, i)
					total += time.Since(startedAt)
					b.StopTimer()
					ctx := context.Background()
					for _, id := range ids {
						if err := n.cri.StopPodSandbox(ctx, id); err != nil {
							b.Fatal(err)
						}
						if err := n.cri.RemovePodSandbox(ctx, id); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
				}
			})
		}
	}
}

func benchManifest(name string, hostNetwork bool) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  hostNetwork: %v
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
`, name, hostNetwork, busybox)
}

// runDirect starts benchPods pods (sandbox, create, start) with plain CRI
// calls, the runtime's floor, and returns their sandbox IDs.
func runDirect(b *testing.B, n *node, hostNetwork, parallel bool, round int) []string {
	ctx := context.Background()
	ids := make([]string, benchPods)
	errs := make([]error, benchPods)
	one := func(p int) {
		name := fmt.Sprintf("direct-%d-%02d", round, p)
		ns := runtimeapi.NamespaceMode_POD
		hostname := name
		if hostNetwork {
			ns, hostname = runtimeapi.NamespaceMode_NODE, ""
		}
		sb := &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "bench", Uid: name},
			Hostname: hostname,
			Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: ns, Pid: runtimeapi.NamespaceMode_CONTAINER},
			}},
		}
		id, err := n.cri.RunPodSandbox(ctx, sb)
		if err != nil {
			errs[p] = err
			return
		}
		ids[p] = id
		cid, err := n.cri.CreateContainer(ctx, id, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
			Image:    &runtimeapi.ImageSpec{Image: busybox},
			Command:  []string{"sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"},
		}, sb)
		if err != nil {
			errs[p] = err
			return
		}
		errs[p] = n.cri.StartContainer(ctx, cid)
	}
	if parallel {
		var wg sync.WaitGroup
		for p := 0; p < benchPods; p++ {
			wg.Go(func() { one(p) })
		}
		wg.Wait()
	} else {
		for p := 0; p < benchPods; p++ {
			one(p)
		}
	}
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return ids
}
