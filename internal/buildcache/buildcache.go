// Package buildcache is what the caches of binaries built from Go modules
// share (the test control plane and its addons, the conformance programs,
// containerd 2): a directory named after exactly what its binaries are
// built from, and one build into it at a time.
package buildcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// ModuleHash names a cache directory after the Go module in dir: its
// go.mod and go.sum, which pin every source its binaries are built from.
func ModuleHash(dir string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// Lock takes an exclusive flock on dir/.lock until unlock, polling so that
// ctx can cancel the wait: make and go test may build at once, and whoever
// waited uses what the other built.
func Lock(ctx context.Context, dir string, log io.Writer) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for waited := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		if !waited {
			fmt.Fprintf(log, "waiting for another build into %s\n", dir)
			waited = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for another build into %s: %w", dir, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
