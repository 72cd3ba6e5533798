package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/adminapi"
	"github.com/berth-dev/berth/internal/server"
)

func TestStreamRequestURL(t *testing.T) {
	tests := []struct {
		name string
		r    streamRequest
		want string
	}{
		{
			name: "exec with arguments",
			r:    streamRequest{kind: "exec", namespace: "default", pod: "web-node1", container: "app", command: []string{"sh", "-c", "echo $HOME && exit 3"}},
			want: "http://berth/exec/default/web-node1/app?command=sh&command=-c&command=echo+%24HOME+%26%26+exit+3&error=1&output=1",
		},
		{
			name: "interactive terminal: no stderr",
			r:    streamRequest{kind: "exec", namespace: "ns", pod: "p", container: "c", command: []string{"sh"}, stdin: true, tty: true},
			want: "http://berth/exec/ns/p/c?command=sh&input=1&output=1&tty=1",
		},
		{
			name: "attach",
			r:    streamRequest{kind: "attach", namespace: "ns", pod: "p", container: "c", stdin: true},
			want: "http://berth/attach/ns/p/c?error=1&input=1&output=1",
		},
		{
			name: "names are escaped",
			r:    streamRequest{kind: "attach", namespace: "ns", pod: "a b", container: "c?"},
			want: "http://berth/attach/ns/a%20b/c%3F?error=1&output=1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.url().String(); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestStreamModes(t *testing.T) {
	plain := &v1.Container{Name: "app"}
	interactive := &v1.Container{Name: "repl", Stdin: true}
	console := &v1.Container{Name: "console", Stdin: true, TTY: true}
	tests := []struct {
		name                 string
		kind                 string
		stdin, tty, terminal bool
		spec                 *v1.Container
		wantStdin, wantTTY   bool
		wantWarning          string
	}{
		{name: "exec plain", kind: "exec"},
		{name: "exec -i", kind: "exec", stdin: true, wantStdin: true},
		{name: "exec -it on a terminal", kind: "exec", stdin: true, tty: true, terminal: true, wantStdin: true, wantTTY: true},
		{name: "exec -it without a terminal", kind: "exec", stdin: true, tty: true, wantStdin: true,
			wantWarning: "Unable to use a TTY - input is not a terminal"},
		{name: "exec -t without -i", kind: "exec", tty: true, terminal: true, wantWarning: "-t needs -i"},
		{name: "attach to a plain container", kind: "attach", spec: plain},
		{name: "attach -i to a container without stdin", kind: "attach", stdin: true, spec: plain,
			wantWarning: "container app does not read standard input"},
		{name: "attach -it to a container without a tty", kind: "attach", stdin: true, tty: true, terminal: true, spec: interactive,
			wantStdin: true, wantWarning: "Unable to use a TTY - container repl did not allocate one"},
		{name: "attach -i to a console gets its tty", kind: "attach", stdin: true, spec: console, wantStdin: true, wantTTY: true},
		{name: "attach -it to a console", kind: "attach", stdin: true, tty: true, terminal: true, spec: console, wantStdin: true, wantTTY: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdin, tty, warnings := streamModes(tt.kind, tt.stdin, tt.tty, tt.terminal, tt.spec)
			if stdin != tt.wantStdin || tty != tt.wantTTY {
				t.Errorf("stdin, tty = %v, %v; want %v, %v", stdin, tty, tt.wantStdin, tt.wantTTY)
			}
			got := strings.Join(warnings, "; ")
			if (tt.wantWarning == "") != (got == "") || !strings.Contains(got, tt.wantWarning) {
				t.Errorf("warnings %q, want %q", got, tt.wantWarning)
			}
		})
	}
}

// fakeRuntime prepares every stream at url.
type fakeRuntime struct {
	url string

	mu    sync.Mutex
	execs []*runtimeapi.ExecRequest
}

func (r *fakeRuntime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execs = append(r.execs, req)
	return r.url, nil
}

func (r *fakeRuntime) Attach(context.Context, *runtimeapi.AttachRequest) (string, error) {
	return "", errors.New("no attach in this test")
}

func (r *fakeRuntime) PortForward(context.Context, *runtimeapi.PortForwardRequest) (string, error) {
	return "", errors.New("no port forwarding in this test")
}

// onePod runs one container, default/web/app, as c1.
type onePod struct{}

func (onePod) RunningPodSandboxID(namespace, pod string) (string, types.UID, error) {
	return "", "", fmt.Errorf("no sandboxes in this test: %w", os.ErrNotExist)
}

func (onePod) RunningContainerID(namespace, pod, container string) (string, error) {
	if namespace != "default" || pod != "web" || container != "app" {
		return "", fmt.Errorf("pod %s/%s has no running container %q: %w", namespace, pod, container, os.ErrNotExist)
	}
	return "c1", nil
}

// fakeExecServer speaks the server's side of remote command protocol v4
// as a runtime's streaming server does, for a command that prints
// "got: " and its input on stdout, "oops" on stderr, and exits with
// exitCode. streams is how many streams the client opens.
func fakeExecServer(t *testing.T, streams, exitCode int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := httpstream.Handshake(r, w, []string{remotecommandconsts.StreamProtocolV4Name}); err != nil {
			t.Errorf("handshake: %v", err)
			return
		}
		got := make(chan httpstream.Stream, streams)
		conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
			got <- s
			return nil
		})
		if conn == nil {
			t.Error("upgrade failed")
			return
		}
		defer conn.Close()
		byType := map[string]httpstream.Stream{}
		for range streams {
			select {
			case s := <-got:
				byType[s.Headers().Get(v1.StreamType)] = s
			case <-time.After(10 * time.Second):
				t.Errorf("only %d of %d streams came", len(byType), streams)
				return
			}
		}
		var input []byte
		if in := byType[v1.StreamTypeStdin]; in != nil {
			input, _ = io.ReadAll(in)
		}
		fmt.Fprintf(byType[v1.StreamTypeStdout], "got: %s", input)
		byType[v1.StreamTypeStdout].Close()
		io.WriteString(byType[v1.StreamTypeStderr], "oops")
		byType[v1.StreamTypeStderr].Close()
		st := metav1.Status{Status: metav1.StatusSuccess}
		if exitCode != 0 {
			st = metav1.Status{Status: metav1.StatusFailure, Reason: remotecommandconsts.NonZeroExitCodeReason,
				Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
					{Type: remotecommandconsts.ExitCodeCauseType, Message: fmt.Sprint(exitCode)},
				}}}
		}
		json.NewEncoder(byType[v1.StreamTypeError]).Encode(st)
		byType[v1.StreamTypeError].Close()
	})
}

// The whole path but the runtime: berth exec's client on a unix socket,
// the streaming handler that proxies to the runtime's streaming server,
// and that server's remote command protocol; the exit code comes back.
func TestStreamThroughSocket(t *testing.T) {
	tests := []struct {
		name     string
		stdin    string // "" for no -i
		exitCode int
		wantOut  string
	}{
		{name: "exit code", exitCode: 7, wantOut: "got: "},
		{name: "stdin", stdin: "hello\n", wantOut: "got: hello\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			streams := 3 // error, stdout, stderr
			if tt.stdin != "" {
				streams++
			}
			upstream := httptest.NewServer(fakeExecServer(t, streams, tt.exitCode))
			t.Cleanup(upstream.Close)
			rt := &fakeRuntime{url: upstream.URL + "/exec/token"}

			dir, err := os.MkdirTemp("", "berth-exec-") // short: socket paths are limited
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			socket := adminapi.SocketPath(dir)
			ln, err := net.Listen("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: server.NewStreamingHandler(onePod{}, rt, slog.New(slog.DiscardHandler))}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })

			r := streamRequest{kind: "exec", namespace: "default", pod: "web", container: "app", command: []string{"cat"}}
			var stdout, stderr bytes.Buffer
			opts := remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}
			if tt.stdin != "" {
				r.stdin = true
				opts.Stdin = strings.NewReader(tt.stdin)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err = stream(ctx, socket, r, opts)
			if tt.exitCode != 0 {
				var exit exitCodeError
				if !errors.As(err, &exit) || exit.code != tt.exitCode {
					t.Errorf("err = %v, want exit code %d", err, tt.exitCode)
				}
			} else if err != nil {
				t.Errorf("err = %v", err)
			}
			if stdout.String() != tt.wantOut || stderr.String() != "oops" {
				t.Errorf("stdout %q, stderr %q; want %q, oops", stdout.String(), stderr.String(), tt.wantOut)
			}
			rt.mu.Lock()
			defer rt.mu.Unlock()
			if len(rt.execs) != 1 || rt.execs[0].Stdin != r.stdin || !rt.execs[0].Stderr || rt.execs[0].Tty {
				t.Errorf("the runtime was asked %v", rt.execs)
			}
		})
	}
}

// Refusals and an absent berth are errors that say what is wrong.
func TestStreamErrors(t *testing.T) {
	dir, err := os.MkdirTemp("", "berth-exec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := adminapi.SocketPath(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := streamRequest{kind: "exec", namespace: "default", pod: "nope", container: "app", command: []string{"sh"}}
	opts := remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard}

	err = stream(ctx, socket, r, opts)
	var sysErr *os.SyscallError
	if !errors.As(err, &sysErr) || sysErr.Syscall != "connect" ||
		err.Error() != "cannot reach berth at "+socket+": connect: no such file or directory" {
		t.Errorf("without a berth: err = %v, want a connect error", err)
	}

	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: server.NewStreamingHandler(onePod{}, &fakeRuntime{}, nil)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	err = stream(ctx, socket, r, opts)
	if err == nil || err.Error() != `pod default/nope has no running container "app": file does not exist` || exitCode(err) != exitNotFound {
		t.Errorf("unknown pod: err = %v, exit code %d", err, exitCode(err))
	}
	r.pod, r.command = "web", nil
	err = stream(ctx, socket, r, opts)
	if err == nil || err.Error() != "berth refused the exec: Bad Request: you must specify at least one command for the container (query parameter \"command\")" {
		t.Errorf("no command: err = %v", err)
	}
}
