package e2e

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pty is a pseudo-terminal pair: the slave is the terminal a process under
// test runs in, the master is the test's keyboard and screen. Everything
// the master reads is kept in screen.
type pty struct {
	t      *testing.T
	master *os.File
	slave  *os.File

	mu     sync.Mutex
	screen strings.Builder
	done   chan struct{} // closed when the reader has returned
}

// openPTY opens a pty pair of rows×cols and starts reading the master
// until the test ends.
func openPTY(t *testing.T, rows, cols uint16) *pty {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	var n int
	err = control(master, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return fmt.Errorf("unlockpt: %w", err)
		}
		var err error
		n, err = unix.IoctlGetInt(fd, unix.TIOCGPTN)
		return err
	})
	if err != nil {
		master.Close()
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Fatalf("open the pty slave: %v", err)
	}
	p := &pty{t: t, master: master, slave: slave, done: make(chan struct{})}
	p.resize(rows, cols)
	go p.read()
	t.Cleanup(func() {
		slave.Close()
		master.Close() // ends the reader
		<-p.done
	})
	return p
}

// control runs fn on f's descriptor without f.Fd(), which would switch the
// file to blocking mode and end its deadlines and clean close.
func control(f *os.File, fn func(fd int) error) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var fnErr error
	if err := raw.Control(func(fd uintptr) { fnErr = fn(int(fd)) }); err != nil {
		return err
	}
	return fnErr
}

func (p *pty) read() {
	defer close(p.done)
	buf := make([]byte, 4096)
	for {
		n, err := p.master.Read(buf)
		p.mu.Lock()
		p.screen.Write(buf[:n])
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// resize sets the terminal's size, as a terminal window does; the kernel
// signals SIGWINCH to the terminal's foreground process group.
func (p *pty) resize(rows, cols uint16) {
	p.t.Helper()
	if err := control(p.master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	}); err != nil {
		p.t.Fatalf("set the pty's size: %v", err)
	}
}

// termios reads the terminal's modes.
func (p *pty) termios() *unix.Termios {
	p.t.Helper()
	var tio *unix.Termios
	if err := control(p.slave, func(fd int) error {
		var err error
		tio, err = unix.IoctlGetTermios(fd, unix.TCGETS)
		return err
	}); err != nil {
		p.t.Fatalf("read the pty's modes: %v", err)
	}
	return tio
}

func (p *pty) typeLine(line string) {
	p.t.Helper()
	if _, err := p.master.WriteString(line + "\r"); err != nil {
		p.t.Fatalf("type %q: %v", line, err)
	}
}

// since returns what the screen shows after offset, and its length.
func (p *pty) since(offset int) (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.screen.String()
	return s[min(offset, len(s)):], len(s)
}

// expect types line, again every few seconds, until the screen shows want
// after it, and returns what it showed; the retries cover a shell that is
// not reading yet.
func (p *pty) expect(line, want string, timeout time.Duration) string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, start := p.since(0)
		p.typeLine(line)
		retry := time.Now().Add(3 * time.Second)
		for time.Now().Before(retry) {
			if out, _ := p.since(start); strings.Contains(out, want) {
				return out
			}
			time.Sleep(50 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			out, _ := p.since(0)
			p.t.Fatalf("typed %q: the terminal did not show %q within %s; it shows:\n%q", line, want, timeout, out)
		}
	}
}
