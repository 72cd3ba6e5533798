package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/utils/clock"
)

// StreamingPods finds the container or pod a stream is for.
type StreamingPods interface {
	// RunningContainerID returns the runtime ID of the running instance of
	// the pod's container. An error wrapping fs.ErrNotExist (unknown pod,
	// unknown container, container not running) becomes a 404 with the
	// error's text.
	RunningContainerID(namespace, pod, container string) (string, error)
	// RunningPodSandboxID returns the runtime ID of the pod's running
	// sandbox, whose network namespace port forwarding enters, and the
	// pod's UID. An error wrapping fs.ErrNotExist (unknown pod, no running
	// sandbox) becomes a 404 with the error's text.
	RunningPodSandboxID(namespace, pod string) (sandboxID string, uid types.UID, err error)
}

// StreamingRuntime prepares exec, attach and port-forward streams and
// returns the URL where the runtime serves each: runtime.Service.
type StreamingRuntime interface {
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error)
}

const (
	streamExec        = "exec"
	streamAttach      = "attach"
	streamPortForward = "portForward"

	// upstreamDialTimeout and upstreamUpgradeTimeout bound reaching the
	// runtime's streaming server and its answer to the upgrade; the
	// stream itself then lasts as long as both ends keep it.
	upstreamDialTimeout    = 10 * time.Second
	upstreamUpgradeTimeout = 30 * time.Second
	// streamLinger bounds the wait for a client to close after the
	// runtime ended its stream; a remote command client closes as soon
	// as it has read the exit status.
	streamLinger = 10 * time.Second
)

type streamingHandler struct {
	pods  StreamingPods
	rt    StreamingRuntime
	log   *slog.Logger
	clock clock.PassiveClock
	// upstream reaches the runtime's streaming server. Each stream has its
	// own connection: a token URL serves one request, and an upgraded
	// connection never returns to a pool.
	upstream http.RoundTripper
	linger   time.Duration
}

// NewStreamingHandler serves the kubelet's streaming paths
// /exec/{namespace}/{pod}/{container} and /attach/{namespace}/{pod}/{container}
// (GET or POST, upgraded to SPDY or WebSocket, with the kubelet's query:
// command, input, output, error, tty), and /portForward/{namespace}/{pod}
// (also .../{uid}; a WebSocket client names its ports in the query, port=,
// a SPDY client in each stream). It asks the runtime for a stream of the
// running container, or of the pod's sandbox, and proxies the upgraded
// connection to the runtime's streaming server, which speaks the remote
// command and port-forward protocols itself. Whoever can reach it can run
// anything in any container: mount it only where clients are
// authenticated, never on the read-only API. A nil logger discards.
func NewStreamingHandler(pods StreamingPods, rt StreamingRuntime, log *slog.Logger) http.Handler {
	return newStreamingHandler(pods, rt, log).routes()
}

func newStreamingHandler(pods StreamingPods, rt StreamingRuntime, log *slog.Logger) *streamingHandler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &streamingHandler{
		pods:  pods,
		rt:    rt,
		log:   log,
		clock: clock.RealClock{},
		upstream: &http.Transport{
			Proxy:                 nil, // the runtime's server is local; no proxy from the environment
			DialContext:           (&net.Dialer{Timeout: upstreamDialTimeout}).DialContext,
			ResponseHeaderTimeout: upstreamUpgradeTimeout,
			DisableKeepAlives:     true,
		},
		linger: streamLinger,
	}
}

func (h *streamingHandler) routes() http.Handler {
	mux := http.NewServeMux()
	for _, kind := range []string{streamExec, streamAttach} {
		pattern := "/" + kind + "/{namespace}/{pod}/{container}"
		mux.HandleFunc("GET "+pattern, h.serve(kind))
		mux.HandleFunc("POST "+pattern, h.serve(kind))
	}
	for _, pattern := range []string{"/portForward/{namespace}/{pod}", "/portForward/{namespace}/{pod}/{uid}"} {
		mux.HandleFunc("GET "+pattern, h.servePortForward)
		mux.HandleFunc("POST "+pattern, h.servePortForward)
	}
	return mux
}

func (h *streamingHandler) serve(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		namespace, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
		opts, err := parseStreamOptions(kind, r.URL.RawQuery)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !httpstream.IsUpgradeRequest(r) {
			// Refused before the runtime is asked, so that a stray request
			// costs no exec session.
			http.Error(w, kind+" needs a connection upgrade (SPDY or WebSocket), as kubectl and berth "+kind+" make",
				http.StatusBadRequest)
			return
		}
		id, err := h.pods.RunningContainerID(namespace, pod, container)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		case err != nil:
			h.log.Error("finding a container to stream", "pod", namespace+"/"+pod, "container", container, "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		target, err := h.streamURL(r.Context(), kind, id, opts)
		if err != nil {
			streamURLError(w, err)
			return
		}
		duration := h.proxyStream(w, r, target)
		command := ""
		if len(opts.Command) > 0 {
			command = opts.Command[0]
		}
		h.log.Info("stream ended", "kind", kind, "pod", namespace+"/"+pod, "container", container,
			"command", command, "tty", opts.TTY, "duration", duration)
	}
}

// proxyStream proxies the upgraded connection to target and returns how
// long the stream lasted. The server's read and write deadlines do not
// cut the stream: hijacking the connection clears them.
func (h *streamingHandler) proxyStream(w http.ResponseWriter, r *http.Request, target *url.URL) time.Duration {
	start := h.clock.Now()
	h.proxy(target).ServeHTTP(&hijackWriter{ResponseWriter: w, linger: h.linger}, r)
	return h.clock.Since(start)
}

// streamURLError answers a failure to prepare a stream.
func streamURLError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if status.Code(err) == codes.NotFound {
		code = http.StatusNotFound // the instance went away since it was looked up
	}
	http.Error(w, err.Error(), code)
}

// streamURL asks the runtime to prepare the stream and returns where it
// serves it.
func (h *streamingHandler) streamURL(ctx context.Context, kind, containerID string, opts v1.PodExecOptions) (*url.URL, error) {
	var (
		raw string
		err error
	)
	if kind == streamExec {
		raw, err = h.rt.Exec(ctx, &runtimeapi.ExecRequest{
			ContainerId: containerID, Cmd: opts.Command, Tty: opts.TTY,
			Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
		})
	} else {
		raw, err = h.rt.Attach(ctx, &runtimeapi.AttachRequest{
			ContainerId: containerID, Tty: opts.TTY,
			Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
		})
	}
	if err != nil {
		return nil, err
	}
	return parseStreamURL(kind, raw)
}

// parseStreamURL checks that the runtime answered with a URL berth can
// proxy to.
func parseStreamURL(kind, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the runtime answered %s with an unusable URL %q", kind, raw)
	}
	return u, nil
}

// proxy forwards one request, and its upgraded connection, to target. The
// upgraded connection ends when either side closes it, or when the server
// cancels the request's context at shutdown.
func (h *streamingHandler) proxy(target *url.URL) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The token URL alone names the stream; the client's path and
			// query were for berth.
			u := *target
			pr.Out.URL = &u
			pr.Out.Host = ""
			// The client's credentials were for berth, not the runtime.
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Cookie")
		},
		Transport: h.upstream,
		ModifyResponse: func(resp *http.Response) error {
			if rwc, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
				resp.Body = fullCloser{rwc}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			h.log.Warn("proxying a stream to the runtime", "url", target.Redacted(), "err", err)
			http.Error(w, "reaching the runtime's streaming server: "+err.Error(), http.StatusBadGateway)
		},
		ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
}

// fullCloser hides the runtime connection's CloseWrite from the proxy,
// which would otherwise pass a client's end of input on as a half-close
// and keep the stream until the runtime ends it: a command that never
// ends (sleep) would outlive its client for good. Neither SPDY nor
// WebSocket sessions half-close; a client's EOF means it is gone, and the
// proxy then closes both connections.
type fullCloser struct{ io.ReadWriteCloser }

// hijackWriter hands the proxy a client connection that lingers only so
// long once the runtime has ended the stream: the proxy half-closes it, so
// that the client reads all that was sent, and waits for the client to
// close; one that does not is cut after linger.
type hijackWriter struct {
	http.ResponseWriter
	linger time.Duration
}

func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return lingerConn{Conn: conn, linger: w.linger}, brw, nil
}

type lingerConn struct {
	net.Conn
	linger time.Duration
}

func (c lingerConn) CloseWrite() error {
	var err error
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		err = cw.CloseWrite()
	}
	// A deadline is the socket's own wall-clock time.
	if derr := c.SetReadDeadline(time.Now().Add(c.linger)); err == nil {
		err = derr
	}
	return err
}

// parseStreamOptions reads the kubelet's streaming query. It is strict
// where the kubelet is lenient: a flag that is not a boolean is an error
// rather than false.
func parseStreamOptions(kind, rawQuery string) (v1.PodExecOptions, error) {
	var opts v1.PodExecOptions
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return opts, fmt.Errorf("malformed query %q: %w", rawQuery, err)
	}
	for _, f := range []struct {
		name string
		dst  *bool
	}{
		{v1.ExecStdinParam, &opts.Stdin},
		{v1.ExecStdoutParam, &opts.Stdout},
		{v1.ExecStderrParam, &opts.Stderr},
		{v1.ExecTTYParam, &opts.TTY},
	} {
		if *f.dst, err = streamFlag(q, f.name); err != nil {
			return opts, err
		}
	}
	if kind == streamExec {
		opts.Command = q[v1.ExecCommandParam]
		if len(opts.Command) == 0 {
			return opts, fmt.Errorf("you must specify at least one command for the container (query parameter %q)", v1.ExecCommandParam)
		}
	}
	switch {
	case opts.TTY && opts.Stderr:
		// A terminal merges stderr into stdout; asking for both is a
		// client's mistake.
		return opts, errors.New("tty and stderr cannot both be true")
	case !opts.Stdin && !opts.Stdout && !opts.Stderr:
		return opts, fmt.Errorf("you must specify at least one of stdin (%s), stdout (%s), stderr (%s)",
			v1.ExecStdinParam, v1.ExecStdoutParam, v1.ExecStderrParam)
	}
	return opts, nil
}

// streamFlag reads a boolean flag: absent or empty is false; otherwise what
// strconv.ParseBool takes ("1", "true", "0", "false", ...).
func streamFlag(q url.Values, name string) (bool, error) {
	vals, ok := q[name]
	if !ok || len(vals) == 0 || vals[0] == "" {
		return false, nil
	}
	if len(vals) > 1 {
		return false, fmt.Errorf("query parameter %q is given %d times; give it once", name, len(vals))
	}
	b, err := strconv.ParseBool(vals[0])
	if err != nil {
		return false, fmt.Errorf("query parameter %q: %q is not a boolean (want 1, true, 0 or false)", name, vals[0])
	}
	return b, nil
}
