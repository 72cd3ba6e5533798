package logs

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/testing/fakecri"
)

var _ Runtime = (*fakecri.Runtime)(nil)

// newFakeRuntime is a runtime whose containers (ID → log path) write logs:
// running, but for those named exited. ReopenContainerLog creates the file
// again, as containerd does.
func newFakeRuntime(logs map[string]string, exited ...string) *fakecri.Runtime {
	rt := fakecri.New(nil)
	for _, id := range slices.Sorted(maps.Keys(logs)) {
		state := runtimeapi.ContainerState_CONTAINER_RUNNING
		if slices.Contains(exited, id) {
			state = runtimeapi.ContainerState_CONTAINER_EXITED
		}
		rt.AddContainer(&runtimeapi.Container{Id: id, State: state}, &runtimeapi.ContainerStatus{LogPath: logs[id]})
	}
	return rt
}

// reopened lists the containers whose logs the rotator asked to reopen.
func reopened(rt *fakecri.Runtime) []string {
	var out []string
	for _, c := range rt.CallsOf("ReopenContainerLog") {
		out = append(out, strings.TrimPrefix(c, "ReopenContainerLog "))
	}
	return out
}

func writeLog(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	names, err := readDirNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newTestRotator(rt Runtime, clk *clocktesting.FakeClock, log *bytes.Buffer) *Rotator {
	return NewRotator(rt, RotatorOptions{
		Policy: Policy{MaxSize: 10, MaxFiles: 3}, Workers: 2, Interval: 10 * time.Second, Clock: clk,
		Log: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
}

// Three rounds on a log that grows past MaxSize each time: the log is
// rotated each time, the previous rotated file compressed and, past
// MaxFiles, the oldest removed.
func TestRotatorRotatesCompressesRemoves(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	small := filepath.Join(dir, "1.log")
	exited := filepath.Join(dir, "2.log")
	rt := newFakeRuntime(map[string]string{"a": path, "b": small, "c": exited}, "c")
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	r := newTestRotator(rt, clk, &out)
	writeLog(t, small, "short\n")
	writeLog(t, exited, "an exited container's long log\n")

	for round, content := range []string{"first round\n", "second round\n", "third round\n"} {
		writeLog(t, path, content)
		r.RotateOnce(context.Background())
		if size := fileSize(t, path); size != 0 {
			t.Fatalf("round %d: the log was not reopened empty: %d bytes", round, size)
		}
		clk.Step(time.Minute)
	}
	want := []string{"0.log", "0.log.20261127-120100.gz", "0.log.20261127-120200", "1.log", "2.log"}
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	if got := gunzip(t, filepath.Join(dir, "0.log.20261127-120100.gz")); got != "second round\n" {
		t.Errorf("compressed file holds %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "0.log.20261127-120200")); string(b) != "third round\n" {
		t.Errorf("latest rotated file holds %q", b)
	}
	if !slices.Equal(reopened(rt), []string{"a", "a", "a"}) {
		t.Errorf("reopened %v, want a three times", reopened(rt))
	}
	if out.Len() != 0 && strings.Contains(out.String(), "failed") {
		t.Errorf("unexpected failure logged:\n%s", out.String())
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// When the runtime cannot reopen the log, the rotated file is put back so
// that nothing is lost; the failure is logged once however many rounds it
// lasts, and its end once.
func TestRotatorReopenFailurePutsBack(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	rt := newFakeRuntime(map[string]string{"a": path})
	rt.Fail("ReopenContainerLog", errors.New("runtime says no"))
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	r := newTestRotator(rt, clk, &out)
	writeLog(t, path, "still being written\n")
	for range 3 {
		r.RotateOnce(context.Background())
		clk.Step(time.Minute)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"0.log"}) {
		t.Fatalf("files %v, want the log put back", got)
	}
	if b, _ := os.ReadFile(path); string(b) != "still being written\n" {
		t.Errorf("log holds %q", b)
	}
	if n := strings.Count(out.String(), "rotation failed"); n != 1 {
		t.Errorf("the failure was logged %d times, want once:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "runtime says no") {
		t.Errorf("the log does not give the cause:\n%s", out.String())
	}

	rt.Fail("ReopenContainerLog", nil)
	r.RotateOnce(context.Background())
	if got := dirNames(t, dir); !slices.Equal(got, []string{"0.log", "0.log.20261127-120300"}) {
		t.Errorf("files %v after recovery", got)
	}
	if n := strings.Count(out.String(), "rotation recovered"); n != 1 {
		t.Errorf("recovery logged %d times, want once:\n%s", n, out.String())
	}
}

// A log removed under the runtime is created again at the next round.
func TestRotatorRecreatesRemovedLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	rt := newFakeRuntime(map[string]string{"a": path})
	clk := clocktesting.NewFakeClock(time.Now())
	var out bytes.Buffer
	r := newTestRotator(rt, clk, &out)
	r.RotateOnce(context.Background())
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the log was not created again: %v", err)
	}
	if !slices.Equal(reopened(rt), []string{"a"}) {
		t.Errorf("reopened %v", reopened(rt))
	}
}

// Where the agent can say where a container's log is, a round stats that
// file and asks the runtime nothing more; where the file is not there (the
// container was created under another podLogsDir), the runtime's
// ContainerStatus names the file, and that one is rotated.
func TestRotatorExpectedLogFile(t *testing.T) {
	for name, tc := range map[string]struct {
		expected    func(dir string) string
		statusCalls int
	}{
		"where the agent put it": {expected: func(dir string) string { return filepath.Join(dir, "0.log") }},
		"moved since":            {expected: func(dir string) string { return filepath.Join(dir, "old", "0.log") }, statusCalls: 1},
		"unknown":                {expected: func(string) string { return "" }, statusCalls: 1},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "0.log")
			rt := newFakeRuntime(map[string]string{"a": path})
			writeLog(t, path, "long enough to rotate\n")
			r := NewRotator(rt, RotatorOptions{
				Policy: Policy{MaxSize: 10, MaxFiles: 3}, Interval: 10 * time.Second,
				Clock:   clocktesting.NewFakeClock(time.Now()),
				LogFile: func(c *runtimeapi.Container) string { return tc.expected(dir) },
			})
			r.RotateOnce(context.Background())
			if n := len(rt.CallsOf("ContainerStatus")); n != tc.statusCalls {
				t.Errorf("%d ContainerStatus calls, want %d", n, tc.statusCalls)
			}
			if names := dirNames(t, dir); len(names) != 2 {
				t.Errorf("after the round the log's directory holds %v, want the log and its rotated copy", names)
			}
			if !slices.Equal(reopened(rt), []string{"a"}) {
				t.Errorf("reopened %v, want the rotated container's log", reopened(rt))
			}
		})
	}
}

// Run rotates on every tick of its clock and stops with its context.
func TestRotatorRun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	rt := newFakeRuntime(map[string]string{"a": path})
	clk := clocktesting.NewFakeClock(time.Now())
	var out bytes.Buffer
	r := newTestRotator(rt, clk, &out)
	writeLog(t, path, "long enough to rotate\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		r.Run(ctx)
		close(done)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(dirNames(t, dir)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no rotation after ticks")
		}
		if clk.HasWaiters() {
			clk.Step(10 * time.Second)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}

// BenchmarkCompressFile measures what compressing one rotated 1 MiB log of
// CRI lines costs, the bulk of a rotation's CPU.
func BenchmarkCompressFile(b *testing.B) {
	dir := b.TempDir()
	var content bytes.Buffer
	for i := 0; content.Len() < 1<<20; i++ {
		fmt.Fprintf(&content, "2026-11-27T12:00:%02d.%09dZ stdout F request %d served in %dms status=%d path=/api/v1/items/%d\n",
			i%60, i*7919%1000000000, i, i*31%997, 200+i%3, i*17)
	}
	b.SetBytes(int64(content.Len()))
	for i := 0; b.Loop(); i++ {
		name := filepath.Join(dir, fmt.Sprintf("0.log.%d", i))
		if err := os.WriteFile(name, content.Bytes(), 0o640); err != nil {
			b.Fatal(err)
		}
		if err := compressFile(name); err != nil {
			b.Fatal(err)
		}
	}
}
