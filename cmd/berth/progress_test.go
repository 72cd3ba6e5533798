package main

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestProgressLine(t *testing.T) {
	tests := []struct {
		name        string
		done, total int64
		elapsed     time.Duration
		phase       string
		width       int
		want        string
	}{
		{name: "start", total: 40_000_000, want: "busybox.tar  0 B / 40.0 MB  0%"},
		{name: "under way", done: 12_000_000, total: 40_000_000, elapsed: 4 * time.Second,
			want: "busybox.tar  12.0 MB / 40.0 MB  30%  3.0 MB/s"},
		{name: "all read", done: 40_000_000, total: 40_000_000, elapsed: 10 * time.Second,
			want: "busybox.tar  40.0 MB / 40.0 MB  100%  4.0 MB/s"},
		{name: "more than the size (a file still growing)", done: 50, total: 40, elapsed: time.Second,
			want: "busybox.tar  50 B / 40 B  100%  50 B/s"},
		{name: "size unknown", done: 1_500, elapsed: 2 * time.Second, want: "busybox.tar  1.5 kB  750 B/s"},
		{name: "a phase replaces share and rate", done: 40_000_000, total: 40_000_000, elapsed: 11 * time.Second,
			phase: "unpacking docker.io/library/busybox:1.36", want: "busybox.tar  40.0 MB  unpacking docker.io/library/busybox:1.36"},
		{name: "a phase before any byte", phase: "resolving", want: "busybox.tar  resolving"},
		{name: "cut to the terminal", done: 12_000_000, total: 40_000_000, elapsed: 4 * time.Second, width: 20,
			want: "busybox.tar  12.0 M"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := progressLine("busybox.tar", tt.done, tt.total, tt.elapsed, tt.phase, tt.width); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestCountingReader(t *testing.T) {
	r := &countingReader{r: strings.NewReader("0123456789")}
	if _, err := io.Copy(io.Discard, r); err != nil || r.n.Load() != 10 {
		t.Errorf("counted %d, %v", r.n.Load(), err)
	}
}

// drawRecorder records each write of the display and signals it.
type drawRecorder struct {
	mu     sync.Mutex
	writes []string
	wrote  chan struct{}
}

func (d *drawRecorder) Write(p []byte) (int, error) {
	d.mu.Lock()
	d.writes = append(d.writes, string(p))
	d.mu.Unlock()
	d.wrote <- struct{}{}
	return len(p), nil
}

func (d *drawRecorder) all() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.writes, "")
}

func TestStartProgress(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := &drawRecorder{wrote: make(chan struct{}, 16)}
	p := &transferProgress{label: "x.tar", total: 1000}
	p.read.r = strings.NewReader(strings.Repeat("x", 1000))

	stop := startProgress(context.Background(), rec, clk, p.line)
	<-rec.wrote // the first draw comes at once
	buf := make([]byte, 500)
	if _, err := io.ReadFull(&p.read, buf); err != nil {
		t.Fatal(err)
	}
	// Each tick redraws.
	clk.Step(time.Second)
	<-rec.wrote
	p.setPhase("unpacking x:1")
	// stop draws a last time, then ends the line (into the channel's
	// room: nobody waits for these writes).
	stop()
	want := "\rx.tar  0 B / 1.0 kB  0%\x1b[K" +
		"\rx.tar  500 B / 1.0 kB  50%  500 B/s\x1b[K" +
		"\rx.tar  500 B  unpacking x:1\x1b[K\n"
	if got := rec.all(); got != want {
		t.Errorf("drew\n%q\nwant\n%q", got, want)
	}
}

func TestStartProgressStopsWithContext(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	stop := startProgress(ctx, io.Discard, clk, func(time.Duration) string { return "" })
	cancel()
	// The goroutine ends on its own; stop still finishes the line.
	stop()
}
