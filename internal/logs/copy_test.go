package logs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

const (
	t1 = "2024-05-01T10:00:01.000000001Z"
	t2 = "2024-05-01T10:00:02Z"
	t3 = "2024-05-01T10:00:03.5Z"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCopy(t *testing.T) {
	file := t1 + " stdout F one\n" +
		t2 + " stderr P tw\n" +
		t2 + " stderr P o\n" +
		t2 + " stderr F !\n" +
		"not a cri line\n" +
		t3 + " stdout F three\n"
	long := strings.Repeat("x", 200<<10)

	tests := []struct {
		name string
		file string
		opts Options
		want string
	}{
		{name: "all", file: file, opts: Options{TailLines: -1},
			want: "one\ntwo!\nthree\n"},
		{name: "timestamps once per line", file: file, opts: Options{TailLines: -1, Timestamps: true},
			want: t1 + " one\n" + t2 + " two!\n" + t3 + " three\n"},
		{name: "tail 0", file: file, opts: Options{TailLines: 0}, want: ""},
		{name: "tail 1", file: file, opts: Options{TailLines: 1}, want: "three\n"},
		{name: "tail 2 counts the malformed line, as the kubelet does", file: file, opts: Options{TailLines: 2}, want: "three\n"},
		{name: "tail 3 keeps partials together", file: file, opts: Options{TailLines: 3}, want: "two!\nthree\n"},
		{name: "tail more than there is", file: file, opts: Options{TailLines: 100}, want: "one\ntwo!\nthree\n"},
		{name: "huge tail", file: file, opts: Options{TailLines: 1 << 40}, want: "one\ntwo!\nthree\n"},
		{name: "unfinished last line", file: t1 + " stdout F a\n" + t2 + " stdout F b", opts: Options{TailLines: -1}, want: "a\nb\n"},
		{name: "since leaves out earlier entries", file: file, opts: Options{TailLines: -1, Since: time.Date(2024, 5, 1, 10, 0, 2, 0, time.UTC)},
			want: "two!\nthree\n"},
		{name: "since after everything", file: file, opts: Options{TailLines: -1, Since: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
			want: ""},
		{name: "tail, then since", file: file, opts: Options{TailLines: 3, Since: time.Date(2024, 5, 1, 10, 0, 3, 0, time.UTC)},
			want: "three\n"},
		{name: "limit bytes cuts the output", file: file, opts: Options{TailLines: -1, LimitBytes: 6}, want: "one\ntw"},
		{name: "limit bytes above the size", file: file, opts: Options{TailLines: -1, LimitBytes: 1000}, want: "one\ntwo!\nthree\n"},
		// What a runtime leaves on a full disk: a line cut inside its
		// timestamp, then the next write.
		{name: "a line cut short is no output", file: t1 + " stdout F a\n2024-05-01T10:0\n" + t2 + " stdout F b\n", opts: Options{TailLines: -1}, want: "a\nb\n"},
		{name: "a cut last line is no output", file: t1 + " stdout F a\n" + t2 + " std", opts: Options{TailLines: -1}, want: "a\n"},
		{name: "a cut line does not end a partial one", file: t1 + " stdout P a\nxx\n" + t2 + " stdout F b\n", opts: Options{TailLines: -1}, want: "ab\n"},
		{name: "partial without end", file: t1 + " stdout P a\n" + t2 + " stdout P b\n", opts: Options{TailLines: -1}, want: "ab"},
		{name: "tail 1 includes a line in progress", file: t1 + " stdout F a\n" + t2 + " stdout F b\n" + t3 + " stdout P c\n", opts: Options{TailLines: 1}, want: "b\nc"},
		{name: "line longer than the buffers", file: t1 + " stdout F " + long + "\n" + t2 + " stdout F end\n", opts: Options{TailLines: -1}, want: long + "\nend\n"},
		{name: "tail past a long line", file: t1 + " stdout F " + long + "\n" + t2 + " stdout F end\n", opts: Options{TailLines: 1}, want: "end\n"},
		{name: "empty file", file: "", opts: Options{TailLines: -1}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Copy(context.Background(), &out, writeFile(t, tt.file), tt.opts); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				if len(got) > 200 || len(tt.want) > 200 {
					t.Errorf("output differs: got %d bytes, want %d", len(got), len(tt.want))
				} else {
					t.Errorf("got %q, want %q", got, tt.want)
				}
			}
		})
	}
}

// A line left out is logged with the file it is in.
func TestCopyLogsMalformedLine(t *testing.T) {
	var logged bytes.Buffer
	path := writeFile(t, t1+" stdout F a\n2024-05-01T10:0\n")
	var out bytes.Buffer
	opts := Options{TailLines: -1, Log: slog.New(slog.NewTextHandler(&logged, nil))}
	if err := Copy(context.Background(), &out, path, opts); err != nil {
		t.Fatal(err)
	}
	if out.String() != "a\n" {
		t.Errorf("output %q", out.String())
	}
	if got := logged.String(); !strings.Contains(got, "not in the CRI format") || !strings.Contains(got, path) || !strings.Contains(got, "2024-05-01T10:0") {
		t.Errorf("log %q", got)
	}
}

func TestCopyMissingFile(t *testing.T) {
	err := Copy(context.Background(), io.Discard, filepath.Join(t.TempDir(), "none.log"), Options{TailLines: -1})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want fs.ErrNotExist", err)
	}
}

// follower runs Copy with Follow in the background and hands back its output
// line by line.
type follower struct {
	lines chan string
	done  chan error
}

func startFollow(ctx context.Context, t *testing.T, path string, opts Options) *follower {
	t.Helper()
	pr, pw := io.Pipe()
	f := &follower{lines: make(chan string, 100), done: make(chan error, 1)}
	opts.Follow = true
	go func() {
		err := Copy(ctx, pw, path, opts)
		pw.CloseWithError(err)
		f.done <- err
	}()
	go func() {
		defer close(f.lines)
		s := bufio.NewScanner(pr)
		for s.Scan() {
			f.lines <- s.Text()
		}
	}()
	return f
}

// expect waits for the next output line; the timeout only turns a hang into
// a failure.
func (f *follower) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got, ok := <-f.lines:
		if !ok {
			t.Fatalf("output ended, want %q", want)
		}
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no output, want %q", want)
	}
}

func (f *follower) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-f.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Copy did not return")
		return nil
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func TestFollowUntilStop(t *testing.T) {
	path := writeFile(t, t1+" stdout F first\n")
	// Once armed, Stop plays a container that writes its last line and
	// exits just before it is asked: Copy must still copy that line.
	var armed atomic.Bool
	lastWrite := make(chan error, 1)
	stop := func() bool {
		if !armed.Load() {
			return false
		}
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(t3 + " stdout F last\n")
			f.Close()
		}
		lastWrite <- err
		return true
	}
	clk := clocktesting.NewFakeClock(time.Now())
	f := startFollow(context.Background(), t, path, Options{TailLines: -1, Stop: stop, Clock: clk})
	f.expect(t, "first")

	// A line written in two pieces, the first without its newline yet.
	appendTo(t, path, t2+" stdout P sec")
	appendTo(t, path, "\n"+t2+" stdout F ond\n")
	f.expect(t, "second")

	// Whether the follower is still busy or already waiting, it asks Stop
	// again by the next tick at the latest.
	armed.Store(true)
	clk.Step(pollInterval)
	f.expect(t, "last")
	if err := f.wait(t); err != nil {
		t.Errorf("Copy = %v, want nil", err)
	}
	if err := <-lastWrite; err != nil {
		t.Fatal(err)
	}
}

func TestFollowExitedContainer(t *testing.T) {
	path := writeFile(t, t1+" stdout F a\n"+t2+" stdout F b")
	var out bytes.Buffer
	err := Copy(context.Background(), &out, path, Options{Follow: true, TailLines: -1, Stop: func() bool { return true }})
	if err != nil || out.String() != "a\nb\n" {
		t.Errorf("got %q, %v; want the whole file and nil", out.String(), err)
	}
}

func TestFollowNoticesExitOnTick(t *testing.T) {
	path := writeFile(t, t1+" stdout F only\n")
	clk := clocktesting.NewFakeClock(time.Now())
	var exited atomic.Bool
	f := startFollow(context.Background(), t, path, Options{TailLines: -1, Stop: exited.Load, Clock: clk})
	// The ticker exists before the first line is copied, so once the line
	// is out, a step of the clock reaches it.
	f.expect(t, "only")
	exited.Store(true)
	clk.Step(pollInterval)
	if err := f.wait(t); err != nil {
		t.Errorf("Copy = %v, want nil", err)
	}
}

// A rotation renames the file away and the runtime opens a new one: the
// follower copies the rest of the old file, then the new one, as the
// kubelet's ReadLogs does.
func TestFollowAcrossRotation(t *testing.T) {
	path := writeFile(t, t1+" stdout F before\n")
	clk := clocktesting.NewFakeClock(time.Now())
	var exited atomic.Bool
	f := startFollow(context.Background(), t, path, Options{TailLines: -1, Clock: clk, Stop: exited.Load})
	f.expect(t, "before")
	for i := range 3 {
		appendTo(t, path, fmt.Sprintf("%s stdout F tail of file %d\n", t2, i))
		if err := os.Rename(path, fmt.Sprintf("%s.%d", path, i)); err != nil {
			t.Fatal(err)
		}
		// Written after the rename, before the runtime reopens.
		appendTo(t, fmt.Sprintf("%s.%d", path, i), t2+" stdout F late\n")
		writeAt(t, path, fmt.Sprintf("%s stdout F head of file %d\n", t3, i+1))
		f.expect(t, fmt.Sprintf("tail of file %d", i))
		f.expect(t, "late")
		f.expect(t, fmt.Sprintf("head of file %d", i+1))
	}
	exited.Store(true)
	clk.Step(pollInterval)
	if err := f.wait(t); err != nil {
		t.Errorf("Copy = %v, want nil", err)
	}
}

// writeAt creates the file at path, as a runtime reopening a log does.
func writeAt(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A file removed and not created again is followed until the container
// exits: the rotator may yet have the runtime create it again.
func TestFollowRemovedFileUntilExit(t *testing.T) {
	path := writeFile(t, t1+" stdout F x\n")
	clk := clocktesting.NewFakeClock(time.Now())
	var exited atomic.Bool
	f := startFollow(context.Background(), t, path, Options{TailLines: -1, Clock: clk, Stop: exited.Load})
	f.expect(t, "x")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clk.Step(pollInterval)
	writeAt(t, path, t2+" stdout F recreated\n")
	clk.Step(pollInterval)
	f.expect(t, "recreated")
	exited.Store(true)
	clk.Step(pollInterval)
	if err := f.wait(t); err != nil {
		t.Errorf("Copy = %v, want nil", err)
	}
}

func TestFollowEndsWithContext(t *testing.T) {
	path := writeFile(t, t1+" stdout F x\n")
	ctx, cancel := context.WithCancel(context.Background())
	f := startFollow(ctx, t, path, Options{TailLines: -1})
	f.expect(t, "x")
	appendTo(t, path, t2+" stdout F y\n")
	f.expect(t, "y")
	cancel()
	if err := f.wait(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Copy = %v, want context.Canceled", err)
	}
}

// After a rotation the current file may hold only a few lines: the rest of
// what is asked for comes from the newest rotated file not yet compressed.
// Compressed and older files are not read.
func TestCopyAcrossRotation(t *testing.T) {
	path := writeFile(t, t3+" stdout F c1\n"+t3+" stdout F c2\n")
	writeAt(t, path+".20241101-100000", t1+" stdout F old\n")
	writeAt(t, path+".20241101-100000.gz", "not gzip, and not read\n")
	writeAt(t, path+".20241101-100100", t2+" stdout F p1\n"+t2+" stdout P p2-\n"+t2+" stdout F end\n")
	writeAt(t, path+".20241101-100200.tmp", "a leftover, not read\n")
	writeAt(t, path+"x.20241101-100300", t2+" stdout F another container's\n")
	tests := []struct {
		tail int
		want string
	}{
		{tail: -1, want: "p1\np2-end\nc1\nc2\n"},
		{tail: 0, want: ""},
		{tail: 1, want: "c2\n"},
		{tail: 2, want: "c1\nc2\n"},
		{tail: 3, want: "p2-end\nc1\nc2\n"},
		{tail: 10, want: "p1\np2-end\nc1\nc2\n"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if err := Copy(context.Background(), &out, path, Options{TailLines: tt.tail}); err != nil {
			t.Fatal(err)
		}
		if out.String() != tt.want {
			t.Errorf("tail %d: got %q, want %q", tt.tail, out.String(), tt.want)
		}
	}
	// Following, the rotated lines come first, then the current file's.
	clk := clocktesting.NewFakeClock(time.Now())
	var exited atomic.Bool
	f := startFollow(context.Background(), t, path, Options{TailLines: 3, Clock: clk, Stop: exited.Load})
	for _, want := range []string{"p2-end", "c1", "c2"} {
		f.expect(t, want)
	}
	exited.Store(true)
	clk.Step(pollInterval)
	if err := f.wait(t); err != nil {
		t.Errorf("Copy = %v", err)
	}
}
