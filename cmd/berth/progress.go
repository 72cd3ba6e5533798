package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/images"
)

// progressInterval is how often a progress line is redrawn: often enough
// to look alive, seldom enough to cost nothing.
const progressInterval = 200 * time.Millisecond

// countingReader counts the bytes read through it. The count is read by
// the progress display's goroutine while the reader's owner reads.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// progressLine renders the state of a transfer as one line: label, bytes
// done of total (total 0: unknown), the share done and the average rate;
// or, when something else takes the time (resolving, unpacking), label
// with the bytes so far and the phase. A line longer than width (0: any) is cut,
// so that it never wraps and the next redraw overwrites all of it.
func progressLine(label string, done, total int64, elapsed time.Duration, phase string, width int) string {
	var b strings.Builder
	b.WriteString(label)
	switch {
	case phase != "" && done == 0:
		fmt.Fprintf(&b, "  %s", phase)
	case phase != "":
		fmt.Fprintf(&b, "  %s  %s", images.HumanBytes(done), phase)
	case total > 0:
		pct := done * 100 / total
		fmt.Fprintf(&b, "  %s / %s  %d%%", images.HumanBytes(done), images.HumanBytes(total), min(pct, 100))
	default:
		fmt.Fprintf(&b, "  %s", images.HumanBytes(done))
	}
	if phase == "" && elapsed >= time.Second/10 {
		rate := int64(float64(done) / elapsed.Seconds())
		fmt.Fprintf(&b, "  %s/s", images.HumanBytes(rate))
	}
	line := b.String()
	if width > 1 && utf8.RuneCountInString(line) > width-1 {
		// The last column stays free: some terminals wrap when it is
		// written.
		line = string([]rune(line)[:width-1])
	}
	return line
}

// startProgress redraws line(elapsed) in place on w every
// progressInterval, from a goroutine that ends when ctx is done or stop is
// called. stop draws the line a last time and ends it, so that what is
// printed next starts on a line of its own; it returns once the goroutine
// is gone.
func startProgress(ctx context.Context, w io.Writer, clk clock.WithTicker, line func(elapsed time.Duration) string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	start := clk.Now()
	// \r returns to the start of the line, ESC[K erases what a longer
	// line before left on it.
	draw := func() { fmt.Fprintf(w, "\r%s\x1b[K", line(clk.Since(start))) }
	ticker := clk.NewTicker(progressInterval)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer ticker.Stop()
		for {
			draw()
			select {
			case <-ctx.Done():
				return
			case <-ticker.C():
			}
		}
	}()
	return func() {
		cancel()
		<-done
		draw()
		fmt.Fprintln(w)
	}
}

// terminalWidth is w's width in columns when it is a terminal; 0 when it
// is not, or its size is unknown.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
}

// transferProgress is what a progress line shows of one transfer, updated
// by the transfer and read by the display.
type transferProgress struct {
	label string
	total int64
	width int
	read  countingReader
	phase atomic.Pointer[string]
}

func (p *transferProgress) setPhase(phase string) { p.phase.Store(&phase) }

func (p *transferProgress) line(elapsed time.Duration) string {
	phase := ""
	if s := p.phase.Load(); s != nil {
		phase = *s
	}
	return progressLine(p.label, p.read.n.Load(), p.total, elapsed, phase, p.width)
}
