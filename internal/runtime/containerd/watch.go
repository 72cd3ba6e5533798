package containerd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"
)

const (
	// pidPollInterval paces the watch of an adopted containerd where the
	// kernel has no pidfd.
	pidPollInterval = 500 * time.Millisecond
	// socketPollInterval paces the watch of a containerd whose pid is
	// unknown: only its socket tells whether it is there.
	socketPollInterval = 2 * time.Second
)

// waitExit blocks until m's process has exited, and says how, or until ctx
// ends (then it returns ctx's error). berth reaps the containerd it started
// and has its exit status; an adopted one is not berth's child, so it is
// watched through a pidfd, or through its socket when its pid is unknown.
func (m *Managed) waitExit(ctx context.Context, clk clock.WithTicker) (string, error) {
	switch {
	case m.startedByUs:
		select {
		case <-m.exited:
			if m.waitErr == nil {
				return "exited with status 0", nil
			}
			return "exited: " + m.waitErr.Error(), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	case m.pid > 0:
		if err := waitPidExit(ctx, m.pid, clk); err != nil {
			return "", err
		}
		return "exited (its status is unknown: berth is not its parent)", nil
	default:
		if err := waitSocketGone(ctx, m.layout.Socket, clk); err != nil {
			return "", err
		}
		return "stopped listening on its socket", nil
	}
}

// waitPidExit waits for the process pid (not a child of ours) to exit.
// A pidfd becomes readable when the process exits, zombie or not, and
// names that very process, so a reused pid cannot fool it.
func waitPidExit(ctx context.Context, pid int, clk clock.WithTicker) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil { // a kernel before 5.10
		return pollPidExit(ctx, pid, clk)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	if !processAlive(pid) { // it may have died just before the pidfd was opened
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return pollPidExit(ctx, pid, clk)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
	defer stop()
	// Read waits on the runtime's poller until the pidfd is readable.
	err = rc.Read(func(fd uintptr) bool { return pidfdReadable(int(fd)) })
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil { // the pidfd could not be polled: fall back
		return pollPidExit(ctx, pid, clk)
	}
	return nil
}

func pidfdReadable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
	}
}

func pollPidExit(ctx context.Context, pid int, clk clock.WithTicker) error {
	ticker := clk.NewTicker(pidPollInterval)
	defer ticker.Stop()
	for processAlive(pid) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C():
		}
	}
	return nil
}

// waitSocketGone waits until nothing listens on socket: a refused
// connection or a missing socket, never a slow answer, which only says the
// machine is busy.
func waitSocketGone(ctx context.Context, socket string, clk clock.WithTicker) error {
	ticker := clk.NewTicker(socketPollInterval)
	defer ticker.Stop()
	for {
		if socketGone(ctx, socket) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C():
		}
	}
}

func socketGone(ctx context.Context, socket string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
	}
	conn.Close()
	return false
}

// processAlive reports whether pid runs. A zombie counts as gone: a
// containerd that outlived the berth that started it may have nobody to
// reap it.
func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	return !strings.HasPrefix(rest, "Z")
}
