package prober

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/prober/probe"
	"github.com/berth-dev/berth/internal/quarantine"
)

func TestStateSurvivesARestart(t *testing.T) {
	h := newHarness(t)
	p := pod("u1",
		container("web", nil, spec(1, 1, 3, 0), spec(1, 1, 3, 0)),
		container("db", nil, spec(1, 1, 3, 0), nil))
	h.m.AddPod(p)
	h.runner.set("db", Readiness, outcome{res: probe.Failure, output: "no"})
	h.statuses.set("u1", runningStatus(start, "web", "c1", "db", "c2"))
	h.advance(1500 * time.Millisecond)
	h.wantReady("c1", true)
	h.wantStarted("c1", true)
	h.wantReady("c2", false)
	if err := h.m.flush(); err != nil {
		t.Fatal(err)
	}

	// berth restarts an hour later: the running containers are ready and
	// started before any probe ran, and stay so through one failure.
	h2 := newHarnessAt(t, h.path, start.Add(time.Hour))
	h2.wantReady("c1", true)
	h2.wantStarted("c1", true)
	h2.wantReady("c2", false)
	h2.runner.set("web", Readiness, outcome{res: probe.Failure, output: "blip"})
	h2.runner.set("db", Readiness, outcome{res: probe.Failure, output: "no"})
	h2.m.AddPod(p)
	h2.statuses.set("u1", runningStatus(start, "web", "c1", "db", "c2"))
	h2.advance(1500 * time.Millisecond)
	h2.wantCalls("web", Readiness, 1)
	h2.wantCalls("web", Startup, 0) // started: nothing to probe
	h2.wantReady("c1", true)
	if got := h2.updates(); len(got) != 0 {
		t.Errorf("restoring known results published updates: %q", got)
	}

	// The pod goes: its containers leave the file.
	h2.m.RemovePod(p)
	if err := h2.m.flush(); err != nil {
		t.Fatal(err)
	}
	h3 := newHarnessAt(t, h.path, start.Add(2*time.Hour))
	if len(h3.m.results) != 0 {
		t.Errorf("results of a removed pod survived: %v", h3.m.results)
	}
}

func TestRunSavesOnChangeAndAtExit(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.m.Run(ctx); close(done) }()

	h.statuses.set("u1", runningStatus(start, "app", "c1"))
	h.m.AddPod(pod("u1", container("app", nil, spec(1, 1, 3, 0), nil)))
	for u := range h.m.Updates() {
		if u.Type == Readiness && u.Result == Success {
			break
		}
	}
	cancel()
	<-done
	data, err := os.ReadFile(h.path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"c1":{"podUID":"u1","readiness":"Success"}`) {
		t.Errorf("state file %s", data)
	}
}

func TestCorruptStateIsQuarantined(t *testing.T) {
	for _, tc := range []struct{ name, content string }{
		{"truncated", `{"version":1,"containers":{"c1":{"podUID":"u1","readi`},
		{"not json", "\x00\x01garbage"},
		{"unknown result", `{"version":1,"containers":{"c1":{"podUID":"u1","readiness":"Maybe"}}}`},
		{"future version", `{"version":2,"containers":{}}`},
		{"scheme in the ID", `{"version":1,"containers":{"containerd://c1":{"podUID":"u1","readiness":"Success"}}}`},
		{"no pod", `{"version":1,"containers":{"c1":{"readiness":"Success"}}}`},
		{"no result", `{"version":1,"containers":{"c1":{"podUID":"u1"}}}`},
		{"unknown field", `{"version":1,"containers":{"c1":{"podUID":"u1","liveness":"Success"}}}`},
		{"trailing data", `{"version":1,"containers":{}}{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir() + "/probes.json"
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			h := newHarnessAt(t, path, start)
			if len(h.m.results) != 0 {
				t.Errorf("trusted a corrupt file: %v", h.m.results)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("the corrupt file is still in place: %v", err)
			}
			aside := quarantine.Name(path, start, 0)
			if got, err := os.ReadFile(aside); err != nil || string(got) != tc.content {
				t.Errorf("quarantined copy %q, %v", got, err)
			}
			if !strings.Contains(h.logs.String(), path) || !strings.Contains(h.logs.String(), "corrupt") {
				t.Errorf("log does not name the file: %s", h.logs)
			}
			wantCorruptEvent(t, h, path, aside)
		})
	}
}

// wantCorruptEvent checks the one node event of a set-aside state file.
func wantCorruptEvent(t *testing.T, h *harness, path, aside string) {
	t.Helper()
	evs := h.recorder.allNode()
	if len(evs) != 1 || evs[0].eventType != v1.EventTypeWarning || evs[0].reason != ReasonStateCorrupt ||
		!strings.Contains(evs[0].message, path) || !strings.Contains(evs[0].message, "moved to "+aside) {
		t.Errorf("node events %+v, want one %s naming %s and %s", evs, ReasonStateCorrupt, path, aside)
	}
}

// Anything but a regular file where the state file belongs is set aside as
// a corrupt file is, and berth starts: a directory, a fifo (which a plain
// read would wait on for ever), a symlink to nowhere or to a good file.
func TestWrongFileTypeIsQuarantined(t *testing.T) {
	good := `{"version":1,"containers":{"c1":{"podUID":"u1","readiness":"Success"}}}`
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string) error
		kind string
	}{
		{"directory", func(_ *testing.T, p string) error { return os.Mkdir(p, 0o700) }, "directory"},
		{"directory with files", func(_ *testing.T, p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(p, "x"), []byte(good), 0o600)
		}, "directory"},
		{"fifo", func(_ *testing.T, p string) error { return syscall.Mkfifo(p, 0o600) }, "named pipe"},
		{"dangling symlink", func(_ *testing.T, p string) error { return os.Symlink("/nowhere", p) }, "symbolic link"},
		{"symlink to a good file", func(_ *testing.T, p string) error {
			target := filepath.Join(filepath.Dir(p), "elsewhere.json")
			if err := os.WriteFile(target, []byte(good), 0o600); err != nil {
				return err
			}
			return os.Symlink(target, p)
		}, "symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "probes.json")
			if err := tc.make(t, path); err != nil {
				t.Fatal(err)
			}
			h := newHarnessAt(t, path, start)
			if len(h.m.results) != 0 {
				t.Errorf("trusted a %s: %v", tc.kind, h.m.results)
			}
			if _, err := os.Lstat(path); !os.IsNotExist(err) {
				t.Errorf("the %s is still in place: %v", tc.kind, err)
			}
			aside := quarantine.Name(path, start, 0)
			if _, err := os.Lstat(aside); err != nil {
				t.Errorf("not set aside: %v", err)
			}
			wantCorruptEvent(t, h, path, aside)
			if evs := h.recorder.allNode(); len(evs) == 1 && !strings.Contains(evs[0].message, tc.kind) {
				t.Errorf("the event does not say what stood there (%s): %s", tc.kind, evs[0].message)
			}
			// The next save writes a file where the thing was.
			h.m.AddPod(pod("u1", container("app", nil, spec(1, 1, 3, 0), nil)))
			h.statuses.set("u1", runningStatus(start, "app", "c1"))
			h.advance(500 * time.Millisecond)
			if err := h.m.flush(); err != nil {
				t.Fatal(err)
			}
			if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
				t.Errorf("no state file after a save: %v", err)
			}
		})
	}
}

// A second corrupt file set aside at the same instant keeps the first.
func TestSecondCorruptionKeepsTheFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "probes.json")
	for i, content := range []string{"first garbage", "second garbage"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		newHarnessAt(t, path, start)
		if got, err := os.ReadFile(quarantine.Name(path, start, i)); err != nil || string(got) != content {
			t.Errorf("set-aside file %d holds %q, %v; want %q", i, got, err, content)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	in := map[resultKey]cachedResult{
		{Readiness, "c1"}: {Success, "u1"},
		{Startup, "c1"}:   {Success, "u1"},
		{Readiness, "c2"}: {Failure, "u1"},
		{Startup, "c3"}:   {Unknown, "u2"},
		{Liveness, "c1"}:  {Failure, "u1"}, // not kept
	}
	data, err := encodeState(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeState(data)
	if err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	delete(in, resultKey{Liveness, "c1"})
	if len(out) != len(in) {
		t.Fatalf("got %v, want %v", out, in)
	}
	for k, v := range in {
		if out[k] != v {
			t.Errorf("%v: got %v, want %v", k, out[k], v)
		}
	}
}

// A file that cannot even be looked at is not set aside: what berth
// cannot read, it cannot move either.
func TestUnreadableStateIsAnError(t *testing.T) {
	path := t.TempDir() + "/" + strings.Repeat("p", 300) + ".json" // longer than a name may be
	_, err := NewManager(&fakeRunner{}, &fakeStatuses{}, &fakeRecorder{}, clocktesting.NewFakeClock(start), nil, path, nil)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want one naming the file", err)
	}
}

func TestSaveFailureIsReported(t *testing.T) {
	h := newHarness(t)
	h.m.AddPod(pod("u1", container("app", nil, spec(1, 1, 3, 0), nil)))
	h.statuses.set("u1", runningStatus(start, "app", "c1"))
	h.advance(500 * time.Millisecond)
	dir := filepath.Dir(h.path)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := h.m.flush(); err == nil || !strings.Contains(err.Error(), h.path) {
		t.Fatalf("flush into a missing directory: %v, want an error naming %s", err, h.path)
	}
	// The change is not lost: the next save writes it.
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := h.m.flush(); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(h.path); err != nil || !strings.Contains(string(data), `"c1"`) {
		t.Errorf("state file %q, %v", data, err)
	}
}

// A file where the state's directory belongs is moved aside; berth starts
// empty and saves its state again.
func TestStateDirectoryReplacedByAFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "probes")
	if err := os.WriteFile(dir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarnessAt(t, filepath.Join(dir, "state.json"), start)
	aside := quarantine.Name(dir, start, 0)
	if got, err := os.ReadFile(aside); err != nil || string(got) != "x" {
		t.Errorf("set-aside file holds %q, %v", got, err)
	}
	wantCorruptEvent(t, h, dir, aside)
	h.m.AddPod(pod("u1", container("app", nil, spec(1, 1, 3, 0), nil)))
	h.statuses.set("u1", runningStatus(start, "app", "c1"))
	h.advance(500 * time.Millisecond)
	if err := h.m.flush(); err != nil {
		t.Fatal(err)
	}
}
