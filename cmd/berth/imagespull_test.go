package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/runtime/containerd"
)

func TestDownloadTracker(t *testing.T) {
	type totals struct {
		done, total      int64
		blobsDone, blobs int
	}
	looks := []struct {
		active []containerd.Download
		want   totals
	}{
		{nil, totals{}},
		{[]containerd.Download{{Ref: "manifest-sha256:m", Offset: 100, Total: 500}}, totals{100, 500, 0, 1}},
		// The manifest is gone: complete. Two layers start, one of
		// unknown size so far.
		{[]containerd.Download{{Ref: "layer-sha256:a", Offset: 1000, Total: 4000}, {Ref: "layer-sha256:b", Offset: 300}},
			totals{500 + 1000 + 300, 500 + 4000 + 300, 1, 3}},
		{[]containerd.Download{{Ref: "layer-sha256:b", Offset: 2000, Total: 2000}}, totals{500 + 4000 + 2000, 500 + 4000 + 2000, 2, 3}},
		{nil, totals{6500, 6500, 3, 3}},
		{nil, totals{6500, 6500, 3, 3}},
	}
	var tr downloadTracker
	for i, look := range looks {
		tr.observe(look.active)
		var got totals
		got.done, got.total, got.blobsDone, got.blobs = tr.totals()
		if got != look.want {
			t.Errorf("look %d: %+v, want %+v", i, got, look.want)
		}
	}
}

func TestPullProgressLine(t *testing.T) {
	samples := [][]containerd.Download{
		nil,
		{{Ref: "layer-sha256:a", Offset: 1_000_000, Total: 4_000_000}},
	}
	var sampleErr error
	p := &pullProgress{label: "busybox:1.36", sample: func(context.Context) ([]containerd.Download, error) {
		if sampleErr != nil {
			return nil, sampleErr
		}
		s := samples[0]
		if len(samples) > 1 {
			samples = samples[1:]
		}
		return s, nil
	}}
	ctx := context.Background()
	steps := []struct {
		elapsed time.Duration
		failing bool
		finish  string
		want    string
	}{
		{0, false, "", "busybox:1.36  resolving"},
		{time.Second, false, "", "busybox:1.36  0/1 blobs  1.0 MB / 4.0 MB  25%  1.0 MB/s"},
		// A look that fails shows what was known.
		{2 * time.Second, true, "", "busybox:1.36  0/1 blobs  1.0 MB / 4.0 MB  25%  500.0 kB/s"},
		{3 * time.Second, false, "pulled", "busybox:1.36  1/1 blobs  4.0 MB  pulled"},
	}
	for i, s := range steps {
		sampleErr = nil
		if s.failing {
			sampleErr = errors.New("content store gone")
		}
		if s.finish != "" {
			p.finish(s.finish)
		}
		if got := p.line(ctx, s.elapsed); got != s.want {
			t.Errorf("step %d: %q, want %q", i, got, s.want)
		}
	}
}
