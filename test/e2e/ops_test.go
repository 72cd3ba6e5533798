package e2e

import (
	"strings"
	"testing"
	"time"
)

// A berth restarted after kill -9 adopts the containerd its predecessor
// launched, and a clean shutdown (SIGTERM) then stops it, as it stops one
// it launched itself: berth recorded which containerd it manages.
func TestCleanShutdownStopsAdoptedContainerd(t *testing.T) {
	n := startNode(t)
	launched := n.containerdPid()
	n.kill9()
	mark := n.logSize()
	n.start()
	if !strings.Contains(n.logSince(mark), "adopted running containerd") {
		t.Fatalf("the restarted berth did not adopt the running containerd:\n%s", n.logSince(mark))
	}
	pid := n.containerdPid()
	if pid <= 1 || pid != launched || !alive(pid) {
		t.Fatalf("adopted containerd pid %d, want the launched %d, running", pid, launched)
	}
	n.stop()
	// The node's CRI client points at that containerd: a stopped one has no
	// sandboxes left to clean up, and its socket no longer answers.
	n.cri.Close()
	n.cri = nil
	waitFor(t, time.Minute, "the adopted containerd gone after SIGTERM", func() (bool, string) {
		return !alive(pid), "containerd still runs"
	})
}
