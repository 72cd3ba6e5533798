package logs

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// The file is copied aside and truncated in place, so a writer appending to
// it goes on in the same file; rotated copies are compressed and the oldest
// removed, as for container logs.
func TestFileRotatorCopyTruncate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "containerd.log")
	w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	r := NewFileRotator(path, Policy{MaxSize: 10, MaxFiles: 3}, time.Second, clk,
		slog.New(slog.NewTextHandler(&out, nil)))

	r.RotateOnce() // under the size
	for i := range 4 {
		if _, err := w.WriteString(strings.Repeat("x", 10+i) + "\n"); err != nil {
			t.Fatal(err)
		}
		r.RotateOnce()
		clk.Step(time.Minute)
	}
	if _, err := w.WriteString("after\n"); err != nil {
		t.Fatal(err)
	}
	want := []string{"containerd.log", "containerd.log.20261127-120200.gz", "containerd.log.20261127-120300"}
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(path); string(b) != "after\n" {
		t.Errorf("the writer's next line landed as %q, want at the start of the emptied file", b)
	}
	if got := gunzip(t, filepath.Join(dir, want[1])); got != strings.Repeat("x", 12)+"\n" {
		t.Errorf("compressed copy holds %q", got)
	}
	if out.Len() != 0 {
		t.Errorf("unexpected log:\n%s", out.String())
	}
}
