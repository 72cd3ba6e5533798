package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/berth-dev/berth/internal/adminapi"
)

const (
	// streamDialTimeout bounds connecting to the admin socket; the session
	// itself lasts until the command ends or berth is interrupted.
	streamDialTimeout = 10 * time.Second
	// streamPingPeriod keeps an idle session's connection alive and lets
	// each side notice a peer that is gone, as kubectl does.
	streamPingPeriod = 5 * time.Second
)

// exitCodeError is a remote command's non-zero exit status: berth exits
// with it and says nothing more, since the command has had its say.
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string {
	return fmt.Sprintf("command terminated with exit code %d", e.code)
}

func (e exitCodeError) ExitCode() int { return e.code }

type streamFlags struct {
	namespace, container string
	stdin, tty           bool
	rootDir, server      string
}

func (f *streamFlags) register(cmd *cobra.Command, containerHelp string) {
	fs := cmd.Flags()
	addNamespaceFlag(cmd, &f.namespace)
	fs.StringVarP(&f.container, "container", "c", "", containerHelp)
	// Registering completion for a flag just added cannot fail.
	_ = cmd.RegisterFlagCompletionFunc("container", completeContainerNames)
	cmd.ValidArgsFunction = completePodNames
	fs.BoolVarP(&f.stdin, "stdin", "i", false, "pass standard input to the container")
	fs.BoolVarP(&f.tty, "tty", "t", false, "run in a terminal (needs -i and a terminal on standard input)")
	addRootDirFlag(fs, &f.rootDir)
	addServerFlag(fs, &f.server)
}

func newExecCommand() *cobra.Command {
	var f streamFlags
	cmd := &cobra.Command{
		Use:   "exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARGS...]",
		Short: "Run a command in a running container, like kubectl exec",
		Long: `Run a command in a running container of a pod, through the container
runtime's streaming server, and exit with the command's exit code. With -i,
standard input goes to the command; with -t as well, the command runs in a
terminal: the local one is put in raw mode and its size follows resizes.

Without -c, the pod's only container is used (or the one its
kubectl.kubernetes.io/default-container annotation names), read from the
local API (--server). Static pods' names end with the node name, as
"berth pods" shows them. Needs root: the stream goes through
<root-dir>/` + adminapi.SocketName + `.`,
		Example: `  # Run a command in the pod's container
  berth exec web-node1 -- cat /etc/hostname

  # A shell in the container "app", in a terminal
  berth exec -it web-node1 -c app -- sh

  # Standard input to the command
  echo hello | berth exec -i web-node1 -- cat`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return errors.New("want: berth exec POD [-c CONTAINER] -- COMMAND [ARGS...] (the command follows --)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStream(cmd, f, streamRequest{kind: "exec", pod: args[0], command: args[1:]})
		},
	}
	f.register(cmd, "container to run the command in")
	return cmd
}

// streamRequest is one exec or attach: where, what, and which streams.
type streamRequest struct {
	kind                      string // "exec" or "attach"
	namespace, pod, container string
	command                   []string
	stdin, tty                bool
}

// url is the kubelet's streaming URL of r on the admin socket, whose
// transport ignores the host.
func (r streamRequest) url() *url.URL {
	q := url.Values{}
	for _, c := range r.command {
		q.Add(v1.ExecCommandParam, c)
	}
	if r.stdin {
		q.Set(v1.ExecStdinParam, "1")
	}
	q.Set(v1.ExecStdoutParam, "1")
	if r.tty {
		// A terminal carries stderr on stdout.
		q.Set(v1.ExecTTYParam, "1")
	} else {
		q.Set(v1.ExecStderrParam, "1")
	}
	segments := []string{r.kind, r.namespace, r.pod, r.container}
	u := &url.URL{Scheme: "http", Host: "berth", RawQuery: q.Encode()}
	for _, s := range segments {
		u.Path += "/" + s
		u.RawPath += "/" + url.PathEscape(s)
	}
	return u
}

// runStream completes r from the flags and the pod, then runs it on the
// terminal or standard streams of cmd.
func runStream(cmd *cobra.Command, f streamFlags, r streamRequest) error {
	ctx := cmd.Context()
	r.namespace, r.container = f.namespace, f.container
	var spec *v1.Container
	if r.container == "" || r.kind == "attach" {
		pod, err := lookupPod(ctx, f.server, r.namespace, r.pod)
		if err != nil {
			return err
		}
		if r.container == "" {
			if r.container, err = defaultContainer(pod); err != nil {
				return err
			}
		}
		spec = podContainer(pod, r.container)
	}
	in := cmd.InOrStdin()
	fd, isTerminal := terminalFd(in)
	var warnings []string
	r.stdin, r.tty, warnings = streamModes(r.kind, f.stdin, f.tty, isTerminal, spec)
	for _, w := range warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "berth: warning:", w)
	}
	opts := remotecommand.StreamOptions{Stdout: cmd.OutOrStdout(), Tty: r.tty}
	if r.stdin {
		opts.Stdin = in
	}
	if !r.tty {
		opts.Stderr = cmd.ErrOrStderr()
	}
	if r.tty && isTerminal {
		t, err := startTerminal(ctx, fd)
		if err != nil {
			return err
		}
		defer t.stop() // before main prints any error: the terminal is sane again
		opts.TerminalSizeQueue = t
	}
	err := stream(ctx, adminapi.SocketPath(f.rootDir), r, opts)
	var sysErr *os.SyscallError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && r.kind == "attach":
		return nil // interrupting is how one detaches
	case ctx.Err() != nil:
		return errors.New("exec interrupted; the command may still run in the container")
	case errors.As(err, &sysErr) && sysErr.Syscall == "connect":
		return adminError(err, f.rootDir)
	}
	return err
}

// lookupPod finds the pod on the local API.
func lookupPod(ctx context.Context, server, namespace, name string) (*v1.Pod, error) {
	list, err := newAPIClient(server).pods(ctx)
	if err != nil {
		return nil, err
	}
	pod := findPod(list.Items, namespace, name)
	if pod == nil {
		return nil, notFoundErrorf("pod %q not found in namespace %q", name, namespace)
	}
	return pod, nil
}

func podContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// streamModes decides, as kubectl does, whether a session sends stdin and
// gets a TTY, and what to warn about: a TTY needs stdin, and a terminal on
// it; attach follows what the container was started with (spec, nil when
// unknown), since a process's terminal cannot change after it started.
func streamModes(kind string, stdin, tty, stdinIsTerminal bool, spec *v1.Container) (bool, bool, []string) {
	var warnings []string
	if kind == "attach" && spec != nil {
		if stdin && !spec.Stdin {
			warnings = append(warnings, fmt.Sprintf("container %s does not read standard input (stdin: false); not sending it", spec.Name))
			stdin = false
		}
		switch {
		case tty && !spec.TTY:
			warnings = append(warnings, fmt.Sprintf("Unable to use a TTY - container %s did not allocate one", spec.Name))
			tty = false
		case spec.TTY:
			// Its output is a terminal's, with stderr in it: streams
			// without a TTY would not match the process's.
			tty = true
		}
		return stdin, tty, warnings
	}
	switch {
	case tty && !stdin:
		warnings = append(warnings, "-t needs -i; running without a TTY")
		tty = false
	case tty && !stdinIsTerminal:
		warnings = append(warnings, "Unable to use a TTY - input is not a terminal or the right kind of file")
		tty = false
	}
	return stdin, tty, warnings
}

// stream runs r over berth's admin socket until the remote side ends it or
// ctx does. A command's non-zero exit is an exitCodeError; berth's refusal
// is its message, a 404 with the not-found exit code.
func stream(ctx context.Context, socket string, r streamRequest, opts remotecommand.StreamOptions) error {
	// The executor reports a failed dial or a refused upgrade only as
	// text: both are kept here as they happen, on the executor's
	// goroutine, to say what went wrong.
	var dialErr error
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		d := net.Dialer{Timeout: streamDialTimeout}
		conn, err := d.DialContext(ctx, "unix", socket)
		dialErr = err
		return conn, err
	}
	// client-go's own SPDY transport dials only TCP; this one dials
	// through UpgradeTransport.
	rt, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{
		UpgradeTransport: &http.Transport{DialContext: dial},
		PingPeriod:       streamPingPeriod,
	})
	if err != nil {
		return fmt.Errorf("setting up the stream: %w", err)
	}
	refusal := &refusalRecorder{next: rt}
	executor, err := remotecommand.NewSPDYExecutorForTransports(refusal, rt, http.MethodPost, r.url())
	if err != nil {
		return fmt.Errorf("setting up the stream: %w", err)
	}
	err = executor.StreamWithContext(ctx, opts)
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return nil
	case dialErr != nil:
		var opErr *net.OpError
		if errors.As(dialErr, &opErr) {
			dialErr = opErr.Err // the path, once
		}
		return fmt.Errorf("cannot reach berth at %s: %w", socket, dialErr)
	case refusal.status == http.StatusNotFound:
		return notFoundErrorf("%s", refusal.message)
	case refusal.status != 0:
		return fmt.Errorf("berth refused the %s: %s: %s", r.kind, http.StatusText(refusal.status), refusal.message)
	case errors.As(err, &exit) && exit.Exited():
		return exitCodeError{code: exit.ExitStatus()}
	}
	return err
}

// refusalRecorder keeps the status and text of an answer that refuses the
// upgrade, and gives the executor the body unread.
type refusalRecorder struct {
	next    http.RoundTripper
	status  int
	message string
}

// maxRefusal bounds the text kept of a refusal.
const maxRefusal = 4 << 10

func (r *refusalRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRefusal))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.status, r.message = resp.StatusCode, strings.TrimSpace(string(body))
	return resp, nil
}
