package main

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"
)

// The size goes out at the start and after each resize; a size that
// cannot be read is skipped; the end of the context stops the goroutine
// and the queue.
func TestWatchSize(t *testing.T) {
	sizes := []remotecommand.TerminalSize{{Width: 80, Height: 24}, {}, {Width: 120, Height: 40}}
	errs := []error{nil, errors.New("not a terminal any more"), nil}
	calls := 0
	size := func() (remotecommand.TerminalSize, error) {
		i := calls
		calls++
		return sizes[i], errs[i]
	}
	resized := make(chan os.Signal)
	ctx, cancel := context.WithCancel(context.Background())
	q, done := watchSize(ctx, size, resized)

	next := func() *remotecommand.TerminalSize {
		t.Helper()
		got := make(chan *remotecommand.TerminalSize, 1)
		go func() { got <- q.Next() }()
		select {
		case s := <-got:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("Next did not return within 10s")
			return nil
		}
	}
	if s := next(); s == nil || *s != sizes[0] {
		t.Fatalf("first size %v, want %v", s, sizes[0])
	}
	resized <- syscall.SIGWINCH // unreadable: skipped
	resized <- syscall.SIGWINCH // the send waits until the goroutine took the first
	if s := next(); s == nil || *s != sizes[2] {
		t.Fatalf("size after resizes %v, want %v", s, sizes[2])
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the size watcher did not stop with its context")
	}
	if s := q.Next(); s != nil {
		t.Errorf("Next after the end = %v, want nil", s)
	}
}
