package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/runtime/containerd"
)

func newImagesPullCommand() *cobra.Command {
	var (
		flags   containerdFlags
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "pull IMAGE...",
		Short: "Pull images into the runtime the way berth pulls pods' images",
		Long: `Pull images ahead of the pods that need them. berth asks containerd's CRI image
service, as it does for a pod's image, so the image is the same as a pod's pull
would leave it, fetched with the same registry configuration (the hosts files
under <root-dir>/containerd/certs.d for berth's managed containerd) and without
credentials, as berth pulls. Prints the ID of each image pulled. Every image is
tried; the command fails if any pull failed.

On a terminal, a line on standard error shows each pull's progress: the blobs
and bytes downloaded so far and the rate, read from containerd's content
store. It counts every download under way in the runtime, so a pull that berth
makes for a pod at the same time shows in it too. Nothing is shown when
standard error is not a terminal.`,
		Example: `  # Before applying a pod that uses them
  berth images pull docker.io/library/busybox:1.36 registry.example.com/app:v2

  # From a registry on this machine (plain HTTP on localhost, as CRI does)
  berth images pull 127.0.0.1:5000/web:v1`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, refs []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := flags.reach(ctx); err != nil {
				return err
			}
			ic, err := containerd.NewImageClient(flags.socket())
			if err != nil {
				return err
			}
			defer ic.Close()
			var errs []error
			for _, ref := range refs {
				id, err := pullImage(ctx, cmd.ErrOrStderr(), ic, ref)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintln(cmd.OutOrStdout(), id)
			}
			return errors.Join(errs...)
		},
	}
	flags.add(cmd.Flags())
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long")
	return cmd
}

// pullImage pulls one image, showing its progress on progressOut when that
// is a terminal.
func pullImage(ctx context.Context, progressOut io.Writer, ic *containerd.ImageClient, ref string) (string, error) {
	if !isTerminal(progressOut) {
		return ic.Pull(ctx, ref)
	}
	p := &pullProgress{label: ref, width: terminalWidth(progressOut), sample: ic.Downloads}
	stop := startProgress(ctx, progressOut, clock.RealClock{}, func(elapsed time.Duration) string {
		return p.line(ctx, elapsed)
	})
	id, err := ic.Pull(ctx, ref)
	if err != nil {
		p.finish("failed")
	} else {
		p.finish("pulled")
	}
	stop()
	return id, err
}

// pullProgress draws a pull's line from samples of the downloads under
// way, taken by the display as it draws.
type pullProgress struct {
	label  string
	width  int
	sample func(context.Context) ([]containerd.Download, error)

	mu      sync.Mutex
	tracker downloadTracker
	phase   string // set when the pull ended
}

func (p *pullProgress) finish(phase string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase = phase
}

func (p *pullProgress) line(ctx context.Context, elapsed time.Duration) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.phase == "" {
		// A failed look shows the last state again; the pull itself will
		// say what is wrong.
		if active, err := p.sample(ctx); err == nil {
			p.tracker.observe(active)
		}
	} else {
		p.tracker.observe(nil) // the pull returned: every blob is in
	}
	done, total, blobsDone, blobs := p.tracker.totals()
	if blobs == 0 && p.phase == "" {
		return progressLine(p.label, 0, 0, 0, "resolving", p.width)
	}
	label := fmt.Sprintf("%s  %d/%d blobs", p.label, blobsDone, blobs)
	if p.phase != "" {
		return progressLine(label, done, total, elapsed, p.phase, p.width)
	}
	return progressLine(label, done, total, elapsed, "", p.width)
}

// downloadTracker adds up successive looks at the downloads under way. The
// content store lists a blob only while it is written: one seen before and
// gone since is complete.
type downloadTracker struct {
	blobs map[string]blobProgress
}

type blobProgress struct {
	offset, total int64
	done          bool
}

// observe takes one look at the active downloads.
func (t *downloadTracker) observe(active []containerd.Download) {
	if t.blobs == nil {
		t.blobs = map[string]blobProgress{}
	}
	seen := make(map[string]bool, len(active))
	for _, d := range active {
		seen[d.Ref] = true
		t.blobs[d.Ref] = blobProgress{offset: d.Offset, total: max(d.Total, d.Offset)}
	}
	for ref, b := range t.blobs {
		if !seen[ref] && !b.done {
			t.blobs[ref] = blobProgress{offset: b.total, total: b.total, done: true}
		}
	}
}

// totals are the bytes downloaded and known to download, and the blobs
// complete and seen.
func (t *downloadTracker) totals() (done, total int64, blobsDone, blobs int) {
	for _, b := range t.blobs {
		done += b.offset
		total += b.total
		if b.done {
			blobsDone++
		}
	}
	return done, total, blobsDone, len(t.blobs)
}
