package podsource

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/quarantine"
)

var storeTime = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

func openStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := OpenStore(dir, "node-a", clocktesting.NewFakePassiveClock(storeTime), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// requestPod is a pod as DecodeAPIPods hands it to the store.
func requestPod(t *testing.T, manifest string) *v1.Pod {
	t.Helper()
	docs := DecodeAPIPods([]byte(manifest), "node-a")
	if len(docs) != 1 || docs[0].Err != nil {
		t.Fatalf("decoding %q: %+v", manifest, docs)
	}
	return docs[0].Pod
}

func apply(t *testing.T, s *Store, manifest string, want Applied) *v1.Pod {
	t.Helper()
	pod, got, err := s.Apply(requestPod(t, manifest))
	if err != nil || got != want {
		t.Fatalf("Apply = %q, %v; want %q", got, err, want)
	}
	return pod
}

func snapshotNames(s Snapshot) []string {
	names := podNames(s.Pods)
	for _, e := range s.Errors {
		names = append(names, "error "+e.Namespace+"/"+e.Name)
	}
	return names
}

func equalNames(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func TestStoreApplyAndDelete(t *testing.T) {
	dir := filepath.Join(t.TempDir(), StoreDirName)
	s := openStore(t, dir)

	created := apply(t, s, podManifest("web", "busybox:1"), PodCreated)
	if created.UID == "" || !created.CreationTimestamp.Time.Equal(storeTime) {
		t.Errorf("created pod: uid %q, created %v", created.UID, created.CreationTimestamp)
	}
	if created.Annotations[ConfigSourceAnnotationKey] != ApiserverSource {
		t.Errorf("config.source %q", created.Annotations[ConfigSourceAnnotationKey])
	}
	file := filepath.Join(dir, "default_web.json")
	for path, want := range map[string]os.FileMode{dir: 0o700 | fs.ModeDir, file: 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, st.Mode(), err, want)
		}
	}

	same := apply(t, s, podManifest("web", "busybox:1"), PodUnchanged)
	if same.UID != created.UID {
		t.Errorf("unchanged pod got a new UID %s, had %s", same.UID, created.UID)
	}
	// Spelling out a default is no change.
	apply(t, s, podManifest("web", "busybox:1")+"    imagePullPolicy: IfNotPresent\n", PodUnchanged)

	changed := apply(t, s, podManifest("web", "busybox:2"), PodConfigured)
	if changed.UID == created.UID || changed.UID == "" {
		t.Errorf("configured pod kept UID %s", changed.UID)
	}
	other := apply(t, s, strings.Replace(podManifest("web", "busybox:1"), "  name: web\n", "  name: web\n  namespace: tools\n", 1), PodCreated)
	if other.UID == changed.UID {
		t.Error("pods in two namespaces share a UID")
	}
	if got, want := snapshotNames(s.Snapshot()), []string{"default/web", "tools/web"}; !equalNames(got, want) {
		t.Errorf("snapshot %v, want %v", got, want)
	}

	deleted, err := s.Delete("default", "web")
	if err != nil || deleted.UID != changed.UID {
		t.Fatalf("Delete = %v, %v", deleted, err)
	}
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s still there: %v", file, err)
	}
	if _, err := s.Delete("default", "web"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("deleting it again: %v, want not found", err)
	}
	if got, want := snapshotNames(s.Snapshot()), []string{"tools/web"}; !equalNames(got, want) {
		t.Errorf("snapshot %v, want %v", got, want)
	}
	// Applying a deleted pod creates it anew.
	if again := apply(t, s, podManifest("web", "busybox:2"), PodCreated); again.UID == changed.UID {
		t.Error("a re-created pod reused the deleted pod's UID")
	}
}

func TestStoreSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	web := apply(t, s, podManifest("web", "busybox:1"), PodCreated)
	db := apply(t, s, podManifest("db", "busybox:1"), PodCreated)
	// A name that looks like a quarantined file is still a pod.
	odd := apply(t, s, podManifest("x.corrupt-1", "busybox:1"), PodCreated)
	// A write that a crash cut short, and a file someone else put there.
	leftover := filepath.Join(dir, ".default_web.json.tmp-123")
	foreign := filepath.Join(dir, "notes.txt")
	for _, p := range []string{leftover, foreign} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	s = openStore(t, dir) // as after kill -9
	snap := s.Snapshot()
	if got, want := snapshotNames(snap), []string{"default/db", "default/web", "default/x.corrupt-1"}; !equalNames(got, want) {
		t.Fatalf("after restart: %v, want %v", got, want)
	}
	for i, want := range []*v1.Pod{db, web, odd} {
		if snap.Pods[i].UID != want.UID {
			t.Errorf("%s: UID %s after a restart, was %s", want.Name, snap.Pods[i].UID, want.UID)
		}
	}
	if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("interrupted write %s not removed: %v", leftover, err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("a file the store did not write was touched: %v", err)
	}
	if same := apply(t, s, podManifest("web", "busybox:1"), PodUnchanged); same.UID != web.UID {
		t.Errorf("re-applied after a restart: UID %s, want %s", same.UID, web.UID)
	}
}

func TestStoreQuarantinesCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	apply(t, s, podManifest("good", "busybox:1"), PodCreated)
	apply(t, s, podManifest("bad", "busybox:1"), PodCreated)
	bad := filepath.Join(dir, "default_bad.json")
	data, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	// A bit of the pod changed behind the checksum's back.
	if err := os.WriteFile(bad, []byte(strings.Replace(string(data), "busybox:1", "busybox:6", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "default_junk.json"), []byte("{\"checks"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "default_dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir)
	snap := s.Snapshot()
	if got := podNames(snap.Pods); !equalNames(got, []string{"default/good"}) {
		t.Errorf("pods %v, want only default/good", got)
	}
	wantErrs := map[string]string{
		"bad":  "checksum mismatch",
		"dir":  "not a regular file",
		"junk": "unexpected end of JSON input",
	}
	if len(snap.Errors) != len(wantErrs) {
		t.Fatalf("errors %v, want %d", snap.Errors, len(wantErrs))
	}
	for _, e := range snap.Errors {
		want, ok := wantErrs[e.Name]
		if !ok || e.Namespace != "default" || !strings.Contains(e.Error(), want) || !strings.Contains(e.Error(), "quarantined as "+e.Path+".corrupt-") {
			t.Errorf("error %s/%s: %v; want %q and where it was quarantined", e.Namespace, e.Name, e, want)
		}
		if !strings.HasPrefix(e.Error(), e.Path+": ") {
			t.Errorf("error %q does not start with its file", e)
		}
		if _, err := os.Lstat(e.Path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s not moved aside: %v", e.Path, err)
		}
	}
	quarantined, _ := filepath.Glob(filepath.Join(dir, "*.corrupt-*"))
	if len(quarantined) != 3 {
		t.Errorf("quarantined files %v, want 3", quarantined)
	}

	// Applying the name replaces the error with the pod; deleting a name
	// that only has an error forgets it.
	apply(t, s, podManifest("bad", "busybox:1"), PodCreated)
	if pod, err := s.Delete("default", "junk"); err != nil || pod != nil {
		t.Errorf("deleting a quarantined pod: %v, %v", pod, err)
	}
	if got, want := snapshotNames(s.Snapshot()), []string{"default/bad", "default/good", "error default/dir"}; !equalNames(got, want) {
		t.Errorf("snapshot %v, want %v", got, want)
	}

	// Quarantined files are evidence, not pods; those acted on (bad
	// applied again, junk deleted) are forgotten, while the one no one
	// acted on is reported again at the next start, with its reason.
	s = openStore(t, dir)
	snap = s.Snapshot()
	if got, want := snapshotNames(snap), []string{"default/bad", "default/good", "error default/dir"}; !equalNames(got, want) {
		t.Errorf("after another restart: %v, want %v", got, want)
	}
	if len(snap.Errors) == 1 {
		e := snap.Errors[0]
		if want := filepath.Join(dir, "default_dir.json") + ": is a directory, not a regular file (quarantined as " +
			filepath.Join(dir, "default_dir.json") + ".corrupt-"; !strings.HasPrefix(e.Error(), want) {
			t.Errorf("error after a restart %q, want it to start %q", e, want)
		}
	}
	if pod, err := s.Delete("default", "dir"); err != nil || pod != nil {
		t.Errorf("deleting a quarantined pod after a restart: %v, %v", pod, err)
	}
	s = openStore(t, dir)
	if got, want := snapshotNames(s.Snapshot()), []string{"default/bad", "default/good"}; !equalNames(got, want) {
		t.Errorf("after deleting the last quarantined pod and a restart: %v, want %v", got, want)
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, "*.corrupt-*")); len(kept) != 3 {
		t.Errorf("evidence kept: %v, want the 3 quarantined files", kept)
	}
}

// A pod quarantined at a start that then failed (berth stopped before the
// report reached anyone) is reported at the next start, until the user
// acts. Quarantined again after the user applied it, it is reported with
// its new file; the first stays as evidence.
func TestStoreQuarantineSurvivesRestarts(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	apply(t, s, podManifest("victim", "busybox:1"), PodCreated)
	file := filepath.Join(dir, "default_victim.json")
	for i, content := range []string{"{\"checks", "{\"checksum\": 7}"} {
		if i == 1 {
			apply(t, s, podManifest("victim", "busybox:1"), PodCreated) // forgets the first
		}
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		openStore(t, dir) // quarantines it, then "fails"
		for range 2 {
			s = openStore(t, dir)
			snap := s.Snapshot()
			if got, want := snapshotNames(snap), []string{"error default/victim"}; !equalNames(got, want) {
				t.Fatalf("round %d: snapshot %v, want %v", i, got, want)
			}
			if msg := snap.Errors[0].Error(); !strings.HasPrefix(msg, file+": ") || !strings.Contains(msg, "(quarantined as "+quarantine.Name(file, storeTime, 0)+")") {
				t.Errorf("round %d: error %q does not name the file and its latest quarantined copy", i, msg)
			}
		}
	}
	if kept, _ := filepath.Glob(file + ".corrupt-*"); len(kept) != 2 {
		t.Errorf("evidence kept: %v, want both quarantined files", kept)
	}
	if _, err := s.Delete("default", "victim"); err != nil {
		t.Fatal(err)
	}
	if snap := openStore(t, dir).Snapshot(); len(snap.Errors)+len(snap.Pods) != 0 {
		t.Errorf("after delete and restart: %v", snapshotNames(snap))
	}
}

// A file in place of the store's directory is moved aside; the store
// opens empty.
func TestStoreDirectoryReplacedByAFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.WriteFile(dir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dir)
	if _, err := os.Stat(quarantine.Name(dir, storeTime, 0)); err != nil {
		t.Errorf("not moved aside: %v", err)
	}
	apply(t, s, podManifest("web", "busybox:1"), PodCreated)
}

func TestOpenStoreFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(filepath.Join(file, "store"), "node-a", clocktesting.NewFakePassiveClock(storeTime), nil); err == nil {
		t.Error("OpenStore under a file must fail")
	}
}

func TestStoreApplyWriteFails(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(requestPod(t, podManifest("web", "busybox:1"))); err == nil {
		t.Fatal("Apply into a removed directory must fail")
	}
	if snap := s.Snapshot(); len(snap.Pods) != 0 {
		t.Errorf("a pod that was not stored is in the snapshot: %v", podNames(snap.Pods))
	}
}

func TestStoreRun(t *testing.T) {
	s := openStore(t, t.TempDir())
	apply(t, s, podManifest("a", "busybox:1"), PodCreated)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Snapshot)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx, out)
	}()
	defer func() {
		cancel()
		<-done
	}()
	// receive returns the next snapshot; the timeout only keeps a broken
	// Run from hanging the test.
	receive := func() []string {
		t.Helper()
		select {
		case snap := <-out:
			return snapshotNames(snap)
		case <-time.After(10 * time.Second):
			t.Fatal("no snapshot")
			return nil
		}
	}
	if got := receive(); !equalNames(got, []string{"default/a"}) {
		t.Errorf("first snapshot %v", got)
	}
	// Every change reaches the reader at once, without any clock moving.
	apply(t, s, podManifest("b", "busybox:1"), PodCreated)
	if got := receive(); !equalNames(got, []string{"default/a", "default/b"}) {
		t.Errorf("after an apply: %v", got)
	}
	if _, err := s.Delete("default", "a"); err != nil {
		t.Fatal(err)
	}
	if got := receive(); !equalNames(got, []string{"default/b"}) {
		t.Errorf("after a delete: %v", got)
	}
	// The same pod applied again is no change and wakes nothing.
	apply(t, s, podManifest("b", "busybox:1"), PodUnchanged)
	if len(s.changed) != 0 {
		t.Error("an unchanged apply woke Run")
	}
}

func TestStoreRunSendsTheNewest(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Snapshot)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx, out)
	}()
	defer func() {
		cancel()
		<-done
	}()
	// Nobody reads while two pods are applied: the reader then gets the
	// newest state, never an older one after it.
	apply(t, s, podManifest("b", "busybox:1"), PodCreated)
	apply(t, s, podManifest("c", "busybox:1"), PodCreated)
	want := []string{"default/b", "default/c"}
	for got := snapshotNames(<-out); !equalNames(got, want); got = snapshotNames(<-out) {
		if len(got) > len(want) {
			t.Fatalf("got %v after %v", got, want)
		}
	}
	select {
	case snap := <-out:
		if got := snapshotNames(snap); !equalNames(got, want) {
			t.Errorf("an older snapshot came after the newest: %v", got)
		}
	default:
	}
}
