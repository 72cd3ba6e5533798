package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The directory of a pod berth lost track of (killed while the pod
// stopped, its record set aside) is removed by housekeeping, as the
// kubelet's cleanupOrphanedPodDirs does, while a running pod's stays.
func TestOrphanedPodDirRemoved(t *testing.T) {
	n := startNode(t)
	n.writeManifest("live.yaml", sleeper("live", "v1"))
	live := n.waitRunning("live", 2*time.Minute)
	n.stop()

	orphan := filepath.Join(n.root, "pods", "3f1c1e0a-0b7e-4c41-9a57-0d2a4a0c0001")
	for _, dir := range []string{
		filepath.Join(orphan, "volumes", "kubernetes.io~empty-dir", "scratch"),
		filepath.Join(orphan, "containers", "main"),
	} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(orphan, "volumes", "kubernetes.io~empty-dir", "scratch", "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	n.start()
	// Housekeeping runs after the first snapshot, then every 30 s.
	waitFor(t, 2*time.Minute, "the orphaned pod directory removed", func() (bool, string) {
		_, err := os.Stat(orphan)
		return os.IsNotExist(err), "still there"
	})
	if _, err := os.Stat(filepath.Join(n.root, "pods", string(live.UID))); err != nil {
		t.Errorf("the running pod's directory: %v", err)
	}
	n.waitRunning("live", time.Minute)
}
