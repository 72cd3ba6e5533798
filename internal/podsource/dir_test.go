package podsource

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// patience bounds every wait for the watcher. It is a deadline, never a
// period to observe: the tests step a fake clock and read a channel.
const patience = 20 * time.Second

const testResync = time.Hour

type harness struct {
	t     *testing.T
	dir   string
	clk   *testingclock.FakeClock
	out   chan Snapshot
	armed chan struct{}
}

// startDir runs a Dir on dir until the test ends.
func startDir(t *testing.T, dir string) *harness {
	t.Helper()
	h := &harness{
		t:     t,
		dir:   dir,
		clk:   testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		out:   make(chan Snapshot),
		armed: make(chan struct{}, 1),
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := NewDir(dir, "node-1", testResync, h.clk, log)
	d.armed = func() {
		select {
		case h.armed <- struct{}{}:
		default: // one pending step covers the one debounce timer
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, h.out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(patience):
			t.Errorf("Run did not return after cancel")
		}
	})
	return h
}

// next returns the first snapshot that satisfies ok, stepping the fake clock
// through every debounce the watcher arms on the way. skipped counts the
// snapshots that did not satisfy ok.
func (h *harness) next(what string, ok func(Snapshot) bool) (s Snapshot, skipped int) {
	h.t.Helper()
	deadline := time.After(patience)
	for {
		select {
		case <-h.armed:
			h.clk.Step(debounce)
		case s := <-h.out:
			if ok(s) {
				return s, skipped
			}
			skipped++
		case <-deadline:
			h.t.Fatalf("no snapshot with %s", what)
		}
	}
}

func hasPods(names ...string) func(Snapshot) bool {
	return func(s Snapshot) bool {
		if len(s.Pods) != len(names) {
			return false
		}
		for i, p := range s.Pods {
			if p.Name != names[i] {
				return false
			}
		}
		return true
	}
}

// writeAtomically writes a file the way careful tools do: a hidden temporary
// file renamed into place.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestDirAddEditDelete(t *testing.T) {
	dir := t.TempDir()
	h := startDir(t, dir)
	h.next("no pods at start", hasPods())

	path := filepath.Join(dir, "web.yaml")
	writeAtomically(t, path, podManifest("web", "nginx:1.25"))
	s, _ := h.next("the new pod", hasPods("web-node-1"))
	uid := s.Pods[0].UID

	writeAtomically(t, path, podManifest("web", "nginx:1.26"))
	s, _ = h.next("the edited pod", func(s Snapshot) bool { return hasPods("web-node-1")(s) && s.Pods[0].UID != uid })
	if got := s.Pods[0].Spec.Containers[0].Image; got != "nginx:1.26" {
		t.Errorf("image %q after the edit", got)
	}

	// An edit in place, as an editor may make it.
	if err := os.WriteFile(path, []byte(podManifest("web", "nginx:1.27")), 0o644); err != nil {
		t.Fatal(err)
	}
	h.next("the pod edited in place", func(s Snapshot) bool {
		return hasPods("web-node-1")(s) && s.Pods[0].Spec.Containers[0].Image == "nginx:1.27"
	})

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	h.next("no pods after the delete", hasPods())
}

func TestDirBrokenBesideGood(t *testing.T) {
	dir := t.TempDir()
	h := startDir(t, dir)
	h.next("no pods at start", hasPods())

	writeAtomically(t, filepath.Join(dir, "broken.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: [\n")
	writeAtomically(t, filepath.Join(dir, "good.yaml"), podManifest("good", "busybox"))
	s, _ := h.next("the good pod and one error", func(s Snapshot) bool { return hasPods("good-node-1")(s) && len(s.Errors) == 1 })
	if e := s.Errors[0]; e.Path != filepath.Join(dir, "broken.yaml") || e.Name != "broken.yaml-node-1" {
		t.Errorf("error %+v, want one naming broken.yaml", e)
	}
}

func TestDirCreatedAfterStart(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc", "berth", "manifests")
	h := startDir(t, dir)
	h.next("no pods while the directory is missing", hasPods())

	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, filepath.Join(dir, "web.yaml"), podManifest("web", "busybox"))
	h.next("the pod in the new directory", hasPods("web-node-1"))

	// Removed and made again: the watch follows.
	if err := os.RemoveAll(filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	h.next("no pods after the directory is gone", hasPods())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, filepath.Join(dir, "db.yaml"), podManifest("db", "busybox"))
	h.next("the pod in the directory made again", hasPods("db-node-1"))
}

func TestDirCoalescesBursts(t *testing.T) {
	dir := t.TempDir()
	h := startDir(t, dir)
	h.next("no pods at start", hasPods())

	var want []string
	for i := range 20 {
		name := fmt.Sprintf("pod%02d", i)
		writeAtomically(t, filepath.Join(dir, name+".yaml"), podManifest(name, "busybox"))
		want = append(want, name+"-node-1")
	}
	// The clock is stepped only once every file is in place, so the one
	// debounce armed by the burst yields one scan that sees all twenty.
	if _, skipped := h.next("all twenty pods", hasPods(want...)); skipped != 0 {
		t.Errorf("%d snapshots before the one with all pods, want none", skipped)
	}
}

func TestDirResync(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "web.yaml")
	writeAtomically(t, target, podManifest("web", "nginx:1.25"))
	if err := os.Symlink(target, filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	h := startDir(t, dir)
	s, _ := h.next("the linked pod", hasPods("web-node-1"))
	uid := s.Pods[0].UID

	// A rescan that finds nothing new sends nothing.
	h.clk.Step(testResync)
	writeAtomically(t, filepath.Join(dir, "db.yaml"), podManifest("db", "busybox"))
	if _, skipped := h.next("the new pod", hasPods("db-node-1", "web-node-1")); skipped != 0 {
		t.Errorf("%d snapshots before the change, want none", skipped)
	}

	// inotify on the directory cannot see the file behind the link change;
	// the periodic rescan does.
	writeAtomically(t, target, podManifest("web", "nginx:1.26"))
	h.clk.Step(testResync)
	h.next("the pod changed behind the link", func(s Snapshot) bool {
		return hasPods("db-node-1", "web-node-1")(s) && s.Pods[1].UID != uid
	})
}
