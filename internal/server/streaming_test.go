package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestParseStreamOptions(t *testing.T) {
	tests := []struct {
		name    string
		kind    string
		query   string
		want    v1.PodExecOptions
		wantErr string
	}{
		{
			name:  "exec with kubectl's flags",
			kind:  streamExec,
			query: "command=sh&command=-c&command=echo+hi&input=1&output=1&tty=1",
			want:  v1.PodExecOptions{Command: []string{"sh", "-c", "echo hi"}, Stdin: true, Stdout: true, TTY: true},
		},
		{
			name:  "true and false spelled out",
			kind:  streamExec,
			query: "command=date&output=true&error=true&input=false",
			want:  v1.PodExecOptions{Command: []string{"date"}, Stdout: true, Stderr: true},
		},
		{
			name:  "attach needs no command",
			kind:  streamAttach,
			query: "output=1&error=1",
			want:  v1.PodExecOptions{Stdout: true, Stderr: true},
		},
		{name: "exec without a command", kind: streamExec, query: "output=1", wantErr: "at least one command"},
		{name: "empty command value still counts", kind: streamExec, query: "command=&output=1",
			want: v1.PodExecOptions{Command: []string{""}, Stdout: true}},
		{name: "tty with stderr", kind: streamExec, query: "command=sh&output=1&error=1&tty=1", wantErr: "tty and stderr cannot both be true"},
		{name: "no stream", kind: streamExec, query: "command=sh&tty=1", wantErr: "at least one of stdin"},
		{name: "no stream on attach", kind: streamAttach, query: "", wantErr: "at least one of stdin"},
		{name: "not a boolean", kind: streamExec, query: "command=sh&output=yes", wantErr: `query parameter "output": "yes" is not a boolean`},
		{name: "flag given twice", kind: streamExec, query: "command=sh&output=1&output=0", wantErr: `"output" is given 2 times`},
		{name: "malformed query", kind: streamExec, query: "command=%zz&output=1", wantErr: "malformed query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStreamOptions(tt.kind, tt.query)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// streamPods knows one running container, default/web/app, as c1.
type streamPods struct{}

func (streamPods) RunningContainerID(namespace, pod, container string) (string, error) {
	switch {
	case namespace != "default" || pod != "web":
		return "", fmt.Errorf("pod %s/%s not found: %w", namespace, pod, fs.ErrNotExist)
	case container == "idle":
		return "", fmt.Errorf("container %q in pod %s/%s is not running: %w", container, namespace, pod, fs.ErrNotExist)
	case container == "broken":
		return "", errors.New("status unavailable")
	case container != "app":
		return "", fmt.Errorf("container %q not found in pod %s/%s: %w", container, namespace, pod, fs.ErrNotExist)
	}
	return "c1", nil
}

// RunningPodSandboxID knows default/web, running in sandbox s1 with UID
// uid-web, and default/pending, whose sandbox is not running.
func (streamPods) RunningPodSandboxID(namespace, pod string) (string, types.UID, error) {
	switch {
	case namespace == "default" && pod == "web":
		return "s1", "uid-web", nil
	case namespace == "default" && pod == "pending":
		return "", "", fmt.Errorf("pod %s/%s has no running sandbox: %w", namespace, pod, fs.ErrNotExist)
	case namespace == "default" && pod == "broken":
		return "", "", errors.New("status unavailable")
	}
	return "", "", fmt.Errorf("pod %s/%s not found: %w", namespace, pod, fs.ErrNotExist)
}

// streamRuntime answers every stream with url, or err, and records what
// it was asked.
type streamRuntime struct {
	url string
	err error

	mu       sync.Mutex
	execs    []*runtimeapi.ExecRequest
	attach   []*runtimeapi.AttachRequest
	forwards []*runtimeapi.PortForwardRequest
}

func (r *streamRuntime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execs = append(r.execs, req)
	return r.url, r.err
}

func (r *streamRuntime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attach = append(r.attach, req)
	return r.url, r.err
}

func (r *streamRuntime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forwards = append(r.forwards, req)
	return r.url, r.err
}

func (r *streamRuntime) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.execs) + len(r.attach) + len(r.forwards)
}

func upgradeRequest(method, target string) *http.Request {
	req := httptest.NewRequest(method, target, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	return req
}

// refusal is a streaming request the handler must answer without a
// stream.
type refusal struct {
	name     string
	req      *http.Request
	rt       *streamRuntime // nil: one whose URL nobody serves
	wantCode int
	wantBody string
	// wantCalls is how many streams the runtime was asked to prepare:
	// none for anything refused before.
	wantCalls int
}

// checkRefusals serves each request and checks the answer and how far it
// got; fallbackURL is the runtime's URL when a case gives no runtime.
func checkRefusals(t *testing.T, tests []refusal, fallbackURL string) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := tt.rt
			if rt == nil {
				rt = &streamRuntime{url: fallbackURL}
			}
			rec := httptest.NewRecorder()
			NewStreamingHandler(streamPods{}, rt, nil).ServeHTTP(rec, tt.req)
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("got %d %q, want %d with %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
			if got := rt.calls(); got != tt.wantCalls {
				t.Errorf("the runtime prepared %d streams, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestStreamingRefusals(t *testing.T) {
	tests := []refusal{
		{name: "unknown pod", req: upgradeRequest("POST", "/exec/default/nope/app?command=sh&output=1"),
			wantCode: 404, wantBody: "pod default/nope not found"},
		{name: "unknown namespace", req: upgradeRequest("GET", "/attach/other/web/app?output=1"),
			wantCode: 404, wantBody: "pod other/web not found"},
		{name: "unknown container", req: upgradeRequest("POST", "/exec/default/web/db?command=sh&output=1"),
			wantCode: 404, wantBody: `container "db" not found in pod default/web`},
		{name: "container not running", req: upgradeRequest("POST", "/exec/default/web/idle?command=sh&output=1"),
			wantCode: 404, wantBody: `container "idle" in pod default/web is not running`},
		{name: "lookup fails", req: upgradeRequest("POST", "/exec/default/web/broken?command=sh&output=1"),
			wantCode: 500, wantBody: "status unavailable"},
		{name: "no command", req: upgradeRequest("POST", "/exec/default/web/app?output=1"),
			wantCode: 400, wantBody: "at least one command"},
		{name: "tty and stderr", req: upgradeRequest("POST", "/exec/default/web/app?command=sh&tty=1&output=1&error=1"),
			wantCode: 400, wantBody: "tty and stderr cannot both be true"},
		{name: "no stream", req: upgradeRequest("POST", "/attach/default/web/app"),
			wantCode: 400, wantBody: "at least one of stdin"},
		{name: "not an upgrade", req: httptest.NewRequest("POST", "/exec/default/web/app?command=sh&output=1", nil),
			wantCode: 400, wantBody: "exec needs a connection upgrade"},
		{name: "wrong method", req: upgradeRequest("PUT", "/exec/default/web/app?command=sh&output=1"),
			wantCode: 405},
		{name: "path too short", req: upgradeRequest("POST", "/exec/default/web?command=sh&output=1"),
			wantCode: 404},
		{name: "instance gone in the runtime", req: upgradeRequest("POST", "/exec/default/web/app?command=sh&output=1"),
			rt:       &streamRuntime{err: status.Error(codes.NotFound, "container c1 not found")},
			wantCode: 404, wantBody: "container c1 not found", wantCalls: 1},
		{name: "runtime fails", req: upgradeRequest("POST", "/exec/default/web/app?command=sh&output=1"),
			rt:       &streamRuntime{err: status.Error(codes.Unavailable, "runtime down")},
			wantCode: 500, wantBody: "runtime down", wantCalls: 1},
		{name: "runtime answers no URL", req: upgradeRequest("GET", "/attach/default/web/app?output=1"),
			rt:       &streamRuntime{url: "/attach/token"},
			wantCode: 500, wantBody: "unusable URL", wantCalls: 1},
		{name: "streaming server unreachable", req: upgradeRequest("GET", "/attach/default/web/app?output=1"),
			rt:       &streamRuntime{url: closedURL(t) + "/attach/token"},
			wantCode: 502, wantBody: "reaching the runtime's streaming server", wantCalls: 1},
	}
	checkRefusals(t, tests, "http://127.0.0.1:1/exec/token")
}

// closedURL is the URL of a port that was just free and is closed again,
// so connecting to it is refused.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// echoUpstream stands in for the runtime's streaming server: it serves
// /exec/token by switching protocols and echoing every line. A line
// "bye\n" makes it answer "bye\n" and close, as a command that exits does;
// once its client's side is closed, it keeps its own end open until the
// test ends, as a runtime whose command runs on (sleep) does. Each request
// it gets arrives on got.
type echoUpstream struct {
	*httptest.Server
	got chan *http.Request
}

func startEchoUpstream(t *testing.T) *echoUpstream {
	t.Helper()
	u := &echoUpstream{got: make(chan *http.Request, 1)}
	release := make(chan struct{})
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.got <- r
		if r.URL.Path != "/exec/token" {
			http.Error(w, "unknown or expired token", http.StatusNotFound)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", r.Header.Get("Upgrade"))
		if err := brw.Flush(); err != nil {
			return
		}
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				<-release
				return
			}
			brw.WriteString(line)
			brw.Flush()
			if line == "bye\n" {
				return
			}
		}
	}))
	t.Cleanup(func() {
		close(release)
		u.Close()
	})
	return u
}

// syncBuffer collects log output written from the handler's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// dialUpgrade sends an upgrade request to the server at addr and returns
// the connection with the answer read.
func dialUpgrade(t *testing.T, addr, path string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: berth\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"+
		"X-Stream-Protocol-Version: v4.channel.k8s.io\r\nAuthorization: Bearer secret\r\n\r\n", path)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer to the upgrade: %v", err)
	}
	return conn, br, resp
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen within 10s", what)
	}
}

// startProxy serves a streaming handler, whose runtime prepares every
// stream at upstream, and returns its address and log.
func startProxy(t *testing.T, upstream *echoUpstream, linger time.Duration) (*streamRuntime, string, *syncBuffer) {
	t.Helper()
	rt := &streamRuntime{url: upstream.URL + "/exec/token"}
	logs := &syncBuffer{}
	h := newStreamingHandler(streamPods{}, rt, slog.New(slog.NewTextHandler(logs, nil)))
	h.linger = linger
	hs := httptest.NewServer(h.routes())
	t.Cleanup(hs.Close)
	return rt, strings.TrimPrefix(hs.URL, "http://"), logs
}

// waitLog waits until the log has the line want: the handler writes it
// once the stream has ended and both connections are closed.
func waitLog(t *testing.T, logs *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not end within 10s: the log lacks %q:\n%s", want, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The upgraded connection passes through both ways. A client that goes
// away ends the stream at once, though the runtime would keep it.
func TestStreamingClientGoesAway(t *testing.T) {
	upstream := startEchoUpstream(t)
	rt, addr, logs := startProxy(t, upstream, time.Minute)
	conn, br, resp := dialUpgrade(t, addr, "/exec/default/web/app?command=sleep&command=1000&input=1&output=1&tty=1")
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "SPDY/3.1" {
		t.Fatalf("got %s, upgrade %q", resp.Status, resp.Header.Get("Upgrade"))
	}
	got := <-upstream.got
	// The protocol negotiation is between the client and the runtime.
	if v := got.Header.Get("X-Stream-Protocol-Version"); v != "v4.channel.k8s.io" {
		t.Errorf("the runtime got X-Stream-Protocol-Version %q", v)
	}
	if v := got.Header.Get("Authorization"); v != "" {
		t.Errorf("the client's credentials reached the runtime: %q", v)
	}
	for _, msg := range []string{"hello\n", "\x00\x01binary\xff\n"} {
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		echo, err := br.ReadString('\n')
		if err != nil || echo != msg {
			t.Fatalf("echo = %q, %v; want %q", echo, err, msg)
		}
	}
	conn.Close()
	waitLog(t, logs, `msg="stream ended" kind=exec pod=default/web container=app command=sleep tty=true duration=`)

	want := &runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"sleep", "1000"}, Tty: true, Stdin: true, Stdout: true}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.execs) != 1 || rt.execs[0].String() != want.String() {
		t.Errorf("the runtime was asked %v, want %v", rt.execs, want)
	}
}

// When the runtime ends the stream, the client reads all it sent, then
// EOF; the stream is over once the client closes, or, if it does not,
// after the linger time.
func TestStreamingRuntimeEndsStream(t *testing.T) {
	for _, clientCloses := range []bool{true, false} {
		t.Run(fmt.Sprintf("client closes: %v", clientCloses), func(t *testing.T) {
			upstream := startEchoUpstream(t)
			linger := time.Hour
			if !clientCloses {
				linger = 10 * time.Millisecond
			}
			_, addr, logs := startProxy(t, upstream, linger)
			conn, br, resp := dialUpgrade(t, addr, "/attach/default/web/app?input=1&output=1")
			if resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("got %s", resp.Status)
			}
			<-upstream.got
			io.WriteString(conn, "bye\n")
			rest, err := io.ReadAll(br)
			if err != nil || string(rest) != "bye\n" {
				t.Errorf("after the runtime closed, the client read %q, %v; want bye and EOF", rest, err)
			}
			if clientCloses {
				conn.Close()
			}
			waitLog(t, logs, `msg="stream ended" kind=attach pod=default/web container=app command="" tty=false duration=`)
		})
	}
}

// An answer of the runtime's streaming server other than 101 (an expired
// token) reaches the client as it is.
func TestStreamingPassesRefusalThrough(t *testing.T) {
	upstream := startEchoUpstream(t)
	rt := &streamRuntime{url: upstream.URL + "/exec/expired"}
	hs := httptest.NewServer(NewStreamingHandler(streamPods{}, rt, nil))
	t.Cleanup(hs.Close)
	_, _, resp := dialUpgrade(t, strings.TrimPrefix(hs.URL, "http://"), "/exec/default/web/app?command=sh&output=1")
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "unknown or expired token") {
		t.Errorf("got %s %q", resp.Status, body)
	}
}
