package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Process is one control-plane program as a test sees it.
type Process struct {
	Name string
	Pid  int    // also its process group
	Log  string // its stdout and stderr
}

// process is a running control-plane program in a process group of its own.
type process struct {
	Process
	logFile *os.File
	done    chan struct{} // closed once the program has exited and been reaped
	err     error         // cmd.Wait's, valid once done is closed

	// Once reaped, the program's pid (and so its group id) may be reused
	// by anyone, so it is signalled by one stop only, however many ask.
	stopOnce sync.Once
	stopErr  error
}

// startProcess starts bin with args, its output appended to logPath.
func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	return startProcessEnv(name, logPath, bin, nil, args...)
}

// startProcessEnv is startProcess with the environment env (nil: the test's).
func startProcessEnv(name, logPath, bin string, env []string, args ...string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If the test binary dies (a -timeout panic, a SIGKILL), the control
		// plane must not outlive it. Pdeathsig fires when the forking thread
		// exits, hence the locked thread below.
		Pdeathsig: syscall.SIGKILL,
	}
	p := &process{Process: Process{Name: name, Log: logPath}, logFile: f, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// This thread forks the program and stays alive until it has exited,
		// so Pdeathsig only ever fires when the whole test process goes.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.Pid = cmd.Process.Pid
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// exited reports whether the program has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how the program ended, with the end of its log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited: %v\n%s", p.Name, p.err, p.logTail(40))
}

// stop sends SIGTERM to the program's process group, SIGKILL after grace,
// and waits for it to be reaped. Only the first call does that; later ones
// return its result.
func (p *process) stop(grace time.Duration) error {
	p.stopOnce.Do(func() {
		p.stopErr = p.terminate(grace)
		p.logFile.Close()
	})
	return p.stopErr
}

func (p *process) terminate(grace time.Duration) error {
	if p.Pid <= 1 { // never signal -1 or -0: that is everyone, or our own group
		return fmt.Errorf("%s: refusing to signal pid %d", p.Name, p.Pid)
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("%s (pid %d) still running 30s after SIGKILL", p.Name, p.Pid)
		}
	}
	// Anything the program left in its group goes too. The group's id stays
	// reserved while any member lives, so this reaches nothing else.
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill what is left of %s's process group: %w", p.Name, err)
	}
	return nil
}

// logTail returns about the last n lines of the program's log.
func (p *process) logTail(n int) string {
	return tail(p.Log, n)
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	const window = 64 << 10 // enough for n lines of any sane log
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(-window, io.SeekEnd)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
