package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/adminapi"
)

// berthCmd is the berth CLI against this node: its local API and its admin
// socket, where exec and attach go.
func (n *node) berthCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(bins, "berth"), args...)
	cmd.Env = append(os.Environ(), "BERTH_SERVER="+n.url(""), "BERTH_ROOT_DIR="+n.root)
	return cmd
}

// berthRun runs the berth CLI with stdin and returns its stdout, stderr and
// exit code.
func (n *node) berthRun(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := n.berthCmd(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("berth %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

const shellPod = `
apiVersion: v1
kind: Pod
metadata:
  name: shell
  annotations: {kubectl.kubernetes.io/default-container: sh}
spec:
  containers:
  - name: sh
    image: %[1]s
    command: ["sleep", "3600"]
  - name: echo
    image: %[1]s
    stdin: true
    command: ["sh", "-c", "while read -r line; do echo \"echo: $line\"; done"]
`

// berth exec runs commands in a running container through containerd's
// streaming server and the admin socket: exit codes, output, stdin, a
// terminal with its size; berth attach talks to a container's own process;
// clients that go away or talk nonsense end only their own stream.
func TestExec(t *testing.T) {
	n := startNode(t)
	n.writeManifest("shell.yaml", fmt.Sprintf(shellPod, busybox))
	n.waitRunning("shell", 90*time.Second)
	pod := "shell-" + nodeName

	t.Run("exit code", func(t *testing.T) {
		out, stderr, code := n.berthRun(t, "", "exec", pod, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
		if code != 7 || out != "out\n" || stderr != "err\n" {
			t.Errorf("exit %d, stdout %q, stderr %q; want 7, out, err", code, out, stderr)
		}
	})
	t.Run("hostname", func(t *testing.T) {
		out, stderr, code := n.berthRun(t, "", "exec", pod, "--", "cat", "/etc/hostname")
		if code != 0 || strings.TrimSpace(out) != pod {
			t.Errorf("exit %d, stdout %q, stderr %q; want the pod's hostname %s", code, out, stderr, pod)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		out, stderr, code := n.berthRun(t, "hi\n", "exec", "-i", pod, "--", "cat")
		if code != 0 || out != "hi\n" {
			t.Errorf("exit %d, stdout %q, stderr %q; want hi", code, out, stderr)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"exec", "nope", "--", "true"}, `pod "nope" not found in namespace "default"`},
			// With -c, the server finds the pod itself.
			{[]string{"exec", "nope", "-c", "sh", "--", "true"}, `pod "nope" not found in namespace "default"`},
			{[]string{"exec", pod, "-c", "db", "--", "true"}, `container "db" not found in pod default/` + pod + `; its containers are: sh, echo`},
			{[]string{"exec", pod, "true"}, "the command follows --"},
			{[]string{"exec", pod, "--", "/no/such/command"}, "no such file"},
		} {
			out, stderr, code := n.berthRun(t, "", tt.args...)
			t.Logf("berth %v: exit %d: %s", tt.args, code, strings.TrimSpace(stderr))
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("berth %v: exit %d, stdout %q, stderr %q; want a failure saying %q", tt.args, code, out, stderr, tt.want)
			}
		}
	})
	t.Run("terminal", func(t *testing.T) { testExecTerminal(t, n, pod) })
	t.Run("attach", func(t *testing.T) { testAttach(t, n, pod) })
	t.Run("client goes away", func(t *testing.T) { testExecClientGone(t, n, pod) })
	t.Run("garbage", func(t *testing.T) { testExecGarbage(t, n, pod) })
}

// An interactive shell in a real terminal: the size goes along at the
// start and on resize, keys reach the shell, its exit code comes back, and
// the local terminal is as it was.
func testExecTerminal(t *testing.T, n *node, pod string) {
	term := openPTY(t, 30, 100)
	before := term.termios()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := n.berthCmd(ctx, "exec", "-it", pod, "--", "sh")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = term.slave, term.slave, term.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	defer func() {
		cancel() // kills berth if the test ends before it did
		<-exited
	}()

	term.expect("stty size", "30 100", 30*time.Second)
	term.expect("echo $((6*7))", "42", 10*time.Second)
	term.resize(40, 120)
	// The kernel signals the terminal's foreground group; a window
	// manager's SIGWINCH comes the same way, and twice does no harm.
	if err := cmd.Process.Signal(syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	term.expect("stty size", "40 120", 10*time.Second)
	term.typeLine("exit 3")
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		out, _ := term.since(0)
		t.Fatalf("berth exec -it did not exit after exit 3; the terminal shows:\n%q", out)
	}
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Errorf("berth exec -it exited %d, want 3", code)
	}
	after := term.termios()
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
		t.Errorf("the terminal's modes were not restored: before %+v, after %+v", before, after)
	}
	if after.Lflag&(unix.ICANON|unix.ECHO) != unix.ICANON|unix.ECHO {
		t.Errorf("the terminal is left without ICANON and ECHO: %#x", after.Lflag)
	}
}

// A container started with stdin: true reads what berth attach -i sends.
func testAttach(t *testing.T, n *node, pod string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := n.berthCmd(ctx, "attach", "-i", pod, "-c", "echo")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		if !waited {
			cancel() // kills berth attach
			cmd.Wait()
		}
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// The line goes once the stream is up, so its echo comes on it.
	fmt.Fprintln(stdin, "hello from attach")
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("berth attach ended without the echo; stderr: %s", stderr.String())
			}
			if line != "echo: hello from attach" {
				continue
			}
			// Attach lasts until it is interrupted, which detaches: the
			// container's process goes on.
			cmd.Process.Signal(os.Interrupt)
			err := cmd.Wait()
			waited = true
			if err != nil {
				t.Errorf("berth attach, interrupted: %v; stderr: %s", err, stderr.String())
			}
			if p := n.pod("shell"); p == nil || !allRunning(p) {
				t.Errorf("the attached container stopped: %s", describe(p))
			}
			return
		case <-ctx.Done():
			t.Fatalf("no echo through berth attach within a minute; stderr: %s", stderr.String())
		}
	}
}

// berth exec killed mid-command ends its stream in berth; berth, the pod
// and later execs go on.
func testExecClientGone(t *testing.T, n *node, pod string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := n.berthCmd(ctx, "exec", pod, "--", "sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	shell := n.pod("shell")
	waitFor(t, 30*time.Second, "the exec'd sleep to run", func() (bool, string) {
		ps := n.exec(shell, "sh", "ps")
		return strings.Contains(ps, "sleep 1000"), ps
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// berth's side of the stream ends when the client is gone, though
	// the command runs on.
	n.waitStreamEnded("sleep")
	if _, err := n.get("/healthz"); err != nil {
		t.Errorf("berth is not healthy after a client went away: %v", err)
	}
	if out, stderr, code := n.berthRun(t, "", "exec", pod, "--", "echo", "still here"); code != 0 || out != "still here\n" {
		t.Errorf("exec after a client went away: exit %d, %q, %q", code, out, stderr)
	}
	if p := n.pod("shell"); p == nil || p.UID != shell.UID || !allRunning(p) {
		t.Errorf("the pod changed after a client went away: %s", describe(p))
	}
}

// allRunning says whether every container of the pod runs its first
// instance.
func allRunning(p *v1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil || cs.RestartCount != 0 {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) == len(p.Spec.Containers)
}

// A client that upgrades the connection, sends bytes that are no SPDY
// and goes away ends its stream, and nothing else happens.
func testExecGarbage(t *testing.T, n *node, pod string) {
	conn, err := net.DialTimeout("unix", adminapi.SocketPath(n.root), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST /exec/default/%s/sh?command=md5sum&input=1&output=1 HTTP/1.1\r\nHost: berth\r\n"+
		"Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n", pod)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to the upgrade: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %s", resp.Status)
	}
	if _, err := conn.Write(bytes.Repeat([]byte("\xff\x00 not spdy \x80\x03"), 512)); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	n.waitStreamEnded("md5sum")
	if _, err := n.get("/healthz"); err != nil {
		t.Errorf("berth is not healthy after garbage: %v", err)
	}
	if out, stderr, code := n.berthRun(t, "", "exec", pod, "--", "echo", "fine"); code != 0 || out != "fine\n" {
		t.Errorf("exec after garbage: exit %d, %q, %q", code, out, stderr)
	}
}

// waitStreamEnded waits until berth logs the end of a stream running
// command: it has closed both ends.
func (n *node) waitStreamEnded(command string) {
	n.t.Helper()
	waitFor(n.t, 30*time.Second, "berth to log the end of the stream of "+command, func() (bool, string) {
		for _, line := range strings.Split(n.berthLog(), "\n") {
			if strings.Contains(line, `"msg":"stream ended"`) && strings.Contains(line, `"command":"`+command+`"`) {
				return true, line
			}
		}
		return false, "no such line"
	})
}

// berthLog returns all of berth's log.
func (n *node) berthLog() string {
	data, _ := os.ReadFile(filepath.Join(n.root, "berth.log"))
	return string(data)
}
