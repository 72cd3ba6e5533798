package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
)

// run listens on o.endpoint and o.proxy and pairs their connections until
// ctx is done; it removes the socket on its way out.
func run(ctx context.Context, o options) error {
	// A socket left by an earlier run (killed, or whose exec went away)
	// would make the listen fail.
	if err := os.Remove(o.endpoint); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	var lc net.ListenConfig
	local, err := lc.Listen(ctx, "unix", o.endpoint)
	if err != nil {
		return fmt.Errorf("--endpoint: %w", err)
	}
	defer os.Remove(o.endpoint)
	remote, err := lc.Listen(ctx, "tcp", o.proxy)
	if err != nil {
		local.Close()
		return fmt.Errorf("--proxy-endpoint: %w", err)
	}
	logf := func(string, ...any) {}
	if o.verbose {
		logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "hostpathplugin: "+format+"\n", args...) }
	}
	logf("proxying %s to connections accepted on %s", o.endpoint, remote.Addr())
	return serve(ctx, local, remote, logf)
}

// serve pairs each connection accepted on local with the next one
// accepted on remote (which the other side opens ahead of need), pipes
// them, and returns once ctx is done and every pair is closed, or when
// accepting fails. It closes both listeners.
func serve(ctx context.Context, local, remote net.Listener, logf func(string, ...any)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()

	// Closing the listeners is what ends their Accept calls.
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		local.Close()
		remote.Close()
	}()

	// remote's connections, one at a time: the rest wait, established, in
	// the kernel's backlog of the listener, which stays open throughout.
	backends := make(chan net.Conn)
	remoteErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		remoteErr <- acceptInto(ctx, remote, backends)
		cancel()
	}()

	var err error
	for {
		c, aerr := local.Accept()
		if aerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("accept on the unix socket: %w", aerr)
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pair(ctx, c, backends, logf)
		}()
	}
	cancel()
	if rerr := <-remoteErr; err == nil {
		err = rerr
	}
	return err
}

// acceptInto hands each connection accepted on l to out until ctx is done
// (nil) or accepting fails.
func acceptInto(ctx context.Context, l net.Listener, out chan<- net.Conn) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept on the proxy endpoint: %w", err)
		}
		select {
		case out <- c:
		case <-ctx.Done():
			c.Close()
			return nil
		}
	}
}

// pair waits for the next backend for c and pipes the two; c is closed
// unpaired if ctx ends first.
func pair(ctx context.Context, c net.Conn, backends <-chan net.Conn, logf func(string, ...any)) {
	select {
	case b := <-backends:
		logf("connection on the socket paired with %s", b.RemoteAddr())
		pipe(ctx, c, b)
		logf("connection with %s closed", b.RemoteAddr())
	case <-ctx.Done():
		c.Close()
	}
}

// pipe copies bytes both ways until either side closes or fails, or ctx
// ends, then closes both and returns once both copies have stopped.
func pipe(ctx context.Context, a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	stopped := 0
	select {
	case <-done:
		stopped++
	case <-ctx.Done():
	}
	// Closing both ends the other copy (and both, when ctx ended).
	a.Close()
	b.Close()
	for ; stopped < 2; stopped++ {
		<-done
	}
}
