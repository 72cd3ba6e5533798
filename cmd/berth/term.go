package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/term"
	"k8s.io/client-go/tools/remotecommand"
)

// terminalFd returns r's file descriptor and whether it is a terminal.
func terminalFd(r io.Reader) (int, bool) {
	f, ok := r.(*os.File)
	if !ok {
		return -1, false
	}
	fd := int(f.Fd())
	return fd, term.IsTerminal(fd)
}

// terminal is the local end of a -t session: in raw mode, so that every key
// (Ctrl-C included) goes to the remote terminal, with its size sent at the
// start and after every resize. It is a remotecommand.TerminalSizeQueue.
type terminal struct {
	sizes *sizeQueue
	stop  func()
}

func (t *terminal) Next() *remotecommand.TerminalSize { return t.sizes.Next() }

// startTerminal puts the terminal fd in raw mode and starts watching its
// size; stop undoes both and is safe to call more than once.
func startTerminal(ctx context.Context, fd int) (*terminal, error) {
	state, err := term.MakeRaw(fd)
	if err != nil {
		return nil, fmt.Errorf("putting the terminal in raw mode: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	resized := make(chan os.Signal, 1)
	signal.Notify(resized, syscall.SIGWINCH)
	size := func() (remotecommand.TerminalSize, error) {
		w, h, err := term.GetSize(fd)
		return remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}, err
	}
	sizes, done := watchSize(ctx, size, resized)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			signal.Stop(resized)
			_ = term.Restore(fd, state) // nothing better to do if the terminal is gone
		})
	}
	return &terminal{sizes: sizes, stop: stop}, nil
}

// sizeQueue hands terminal sizes to remotecommand, one per Next, until its
// context ends.
type sizeQueue struct {
	ctx   context.Context
	sizes chan remotecommand.TerminalSize
}

// Next blocks until the next size; nil once the queue's context ended,
// which stops remotecommand's resize loop.
func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s := <-q.sizes:
		return &s
	case <-q.ctx.Done():
		return nil
	}
}

// watchSize sends size() to the queue at once and again after each signal
// on resized, until ctx ends; done is closed when its goroutine has
// returned. A size that cannot be read is skipped: the session goes on at
// the last one.
func watchSize(ctx context.Context, size func() (remotecommand.TerminalSize, error), resized <-chan os.Signal) (*sizeQueue, <-chan struct{}) {
	q := &sizeQueue{ctx: ctx, sizes: make(chan remotecommand.TerminalSize)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if s, err := size(); err == nil {
				select {
				case q.sizes <- s:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-resized:
			case <-ctx.Done():
				return
			}
		}
	}()
	return q, done
}
