package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"k8s.io/utils/clock"
)

// FileRotator keeps a log file that a process outside berth's control
// appends to (the managed containerd's own log) within a policy. The
// process cannot be asked to reopen the file, so, like logrotate's
// copytruncate, the file is copied aside and truncated in place; the writer
// has it open with O_APPEND and goes on at the new end. What is written
// between the copy and the truncation is lost: a few lines at most, where
// the alternative is a disk filled by a runtime logging every failed write.
type FileRotator struct {
	path     string
	policy   Policy
	interval time.Duration
	clk      clock.WithTicker
	log      *slog.Logger
	// failing says the last round failed, so that a lasting failure is
	// logged once. Only Run's goroutine uses it.
	failing bool
}

// NewFileRotator returns a rotator of the file at path; Run starts it.
func NewFileRotator(path string, policy Policy, interval time.Duration, clk clock.WithTicker, log *slog.Logger) *FileRotator {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FileRotator{path: path, policy: policy, interval: interval, clk: clk, log: log}
}

// Run checks the file every interval until ctx ends.
func (r *FileRotator) Run(ctx context.Context) {
	if r.policy.MaxSize < 0 {
		return
	}
	ticker := r.clk.NewTicker(r.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			r.RotateOnce()
		}
	}
}

// RotateOnce rotates the file if it has reached MaxSize, and reports a
// failure once, not every interval.
func (r *FileRotator) RotateOnce() {
	err := r.rotate()
	switch {
	case err == nil && r.failing:
		r.log.Info("log rotation recovered", "path", r.path)
		r.failing = false
	case err != nil && !r.failing:
		r.log.Warn("log rotation failed; the next round retries", "path", r.path, "err", err)
		r.failing = true
	case err != nil:
		r.log.Debug("log rotation still failing", "path", r.path, "err", err)
	}
}

func (r *FileRotator) rotate() error {
	info, err := os.Stat(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // not written yet
	}
	if err != nil {
		return err
	}
	siblings, err := readDirNames(dirOf(r.path))
	if err != nil {
		return fmt.Errorf("listing the logs beside %s: %w", r.path, err)
	}
	plan := planRotation(r.path, info.Size(), siblings, r.clk.Now(), r.policy)
	if err := prune(plan); err != nil {
		return err
	}
	if plan.rotated == "" {
		return nil
	}
	return copyTruncate(r.path, plan.rotated)
}

// copyTruncate copies the file at path to rotated, then empties it.
func copyTruncate(path, rotated string) (err error) {
	in, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("rotating %s: %w", path, err)
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return fmt.Errorf("rotating %s: %w", path, err)
	}
	out, err := os.OpenFile(rotated, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
	if err != nil {
		return fmt.Errorf("rotating %s: %w", path, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(rotated)
		return fmt.Errorf("copying %s to %s: %w", path, rotated, err)
	}
	if err := out.Close(); err != nil {
		os.Remove(rotated)
		return fmt.Errorf("copying %s to %s: %w", path, rotated, err)
	}
	if err := in.Truncate(0); err != nil {
		return fmt.Errorf("truncating %s: %w", path, err)
	}
	return nil
}
