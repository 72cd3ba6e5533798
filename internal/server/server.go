// Package server is berth's HTTP APIs. The read-only API is the
// counterpart of the kubelet's read-only port, and serves no more than it
// does of what a pod holds: /healthz, /pods, /stats/summary, /metrics,
// /metrics/resource (the series metrics-server scrapes), /metrics/cadvisor
// (cAdvisor's container series) and /metrics/probes, with the
// kubelet's paths, query parameters and response shapes, so the same tools
// and habits work against it; /events, /pods/{namespace}/{name}/events and
// /node/events, which stand in for the API server's events; /devices, the
// device plugins' resources and allocations; /images, the images with
// their garbage-collection state; and /node. It has no authentication, so,
// like the kubelet's, it answers the debugging paths (/containerLogs,
// /exec, /attach, /portForward, /run, /logs, /debug/pprof, /runningpods)
// with 405 "Debug endpoints are disabled.": a container's log is no more
// any local user's than the root-owned file it is kept in. The secure API
// (NewSecure) serves the same plus /containerLogs, exec, attach and
// portForward (NewStreamingHandler), over TLS, to the callers its Guard
// lets through; NewLogsHandler serves /containerLogs on the admin socket.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/eviction"
	"github.com/berth-dev/berth/internal/images"
)

// Source is what the API shows: berth's view of its pods.
type Source interface {
	// Pods returns a snapshot of every pod with its live status; the caller
	// owns the copies.
	Pods() []v1.Pod
	// HealthChecks returns berth's health checks, which /healthz runs.
	HealthChecks() []HealthCheck
	// ContainerLog returns the log file of a container and the ID of the
	// container instance that writes it: the current instance, or with
	// previous the one before it. An error wrapping fs.ErrNotExist means
	// there is no such instance or log (yet), and becomes a 404.
	ContainerLog(namespace, pod, container string, previous bool) (path string, containerID string, err error)
	// ContainerRunning reports whether the container instance is still
	// running, so a follower knows when its log is complete.
	ContainerRunning(containerID string) bool
	// Events returns the events recorded for the pod name, oldest first;
	// the caller owns the copies.
	Events(namespace, pod string) []v1.Event
	// NodeEvents returns the events about the node itself, oldest first.
	NodeEvents() []v1.Event
	// AllEvents returns every event kept, least recently seen first.
	AllEvents() []v1.Event
	// Devices returns the device plugins' resources and every device
	// allocation.
	Devices() devicemanager.Snapshot
	// Images returns every image of the runtime with its GC state.
	Images() ([]images.ImageStatus, error)
	// Node returns the node as the kubelet reports it: capacity,
	// allocatable and the pressure conditions.
	Node() v1.Node
	// Eviction returns the eviction manager's thresholds and what it last
	// saw of them.
	Eviction() eviction.Status
	// StatsSummary measures the node and its pods.
	StatsSummary() (*statsapi.Summary, error)
	// Admission returns how the pod was admitted, or why it was not; false
	// for a pod berth does not want.
	Admission(namespace, pod string) (admission.Result, bool)
}

const (
	// shutdownTimeout bounds how long Run waits for requests in flight once
	// its context ends.
	shutdownTimeout = 5 * time.Second
	// readHeaderTimeout keeps a silent client from holding a connection;
	// there is no write timeout, since followed logs stream for as long as
	// the container runs.
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
	// metricsTimeout bounds one /metrics answer; Prometheus's default
	// scrape timeout is the same.
	metricsTimeout = 10 * time.Second
)

// Server serves the API for one Source.
type Server struct {
	addr    string
	src     Source
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler
	tls     *tls.Config
}

// New returns the read-only API, which will listen on addr (host:port) and
// serve gatherer's metrics on /metrics; with a nil gatherer there is no
// /metrics.
func New(addr string, src Source, gatherer prometheus.Gatherer, log *slog.Logger) *Server {
	s := newServer(addr, src, gatherer, log)
	installDebuggingDisabled(s.mux)
	s.handler = logRequests(s.mux, log, clock.RealClock{})
	return s
}

// Guard decides who reaches the secure API's handlers: *authn.Gate
// (authentication, then AlwaysAllow or the API server's authorization), or
// *authn.Authenticator (AlwaysAllow).
type Guard interface {
	// Require answers the requests it refuses (401, 403) itself and hands
	// the others to next, with the caller in their context.
	Require(next http.Handler) http.Handler
}

// NewSecure returns the secure API, which will listen on addr over TLS
// with tlsConfig: everything the read-only API serves, plus streaming (the
// exec, attach and portForward endpoints), for the callers guard lets
// through only. A request without valid credentials is answered 401, and
// one the authorizer refuses 403, before any handler runs.
func NewSecure(addr string, src Source, gatherer prometheus.Gatherer, streaming http.Handler,
	guard Guard, tlsConfig *tls.Config, log *slog.Logger) *Server {
	s := newServer(addr, src, gatherer, log)
	s.mux.Handle("GET /containerLogs/{namespace}/{pod}/{container}", NewLogsHandler(src, log))
	if streaming != nil {
		// The streaming handler routes /exec/{namespace}/{pod}/{container},
		// /attach/... and /portForward/{namespace}/{pod} itself, with
		// every method an upgrade may use.
		s.mux.Handle("/exec/", streaming)
		s.mux.Handle("/attach/", streaming)
		s.mux.Handle("/portForward/", streaming)
	}
	s.handler = logRequests(guard.Require(s.mux), log, clock.RealClock{})
	s.tls = tlsConfig
	return s
}

func newServer(addr string, src Source, gatherer prometheus.Gatherer, log *slog.Logger) *Server {
	s := &Server{addr: addr, src: src, log: log, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /healthz/{check}", s.healthCheck)
	s.mux.HandleFunc("GET /events", s.events)
	s.mux.HandleFunc("GET /pods", s.pods)
	s.mux.HandleFunc("GET /pods/{namespace}/{pod}/events", s.podEvents)
	s.mux.HandleFunc("GET /pods/{namespace}/{pod}/admission", s.podAdmission)
	s.mux.HandleFunc("GET /node/events", s.nodeEvents)
	s.mux.HandleFunc("GET /devices", s.devices)
	s.mux.HandleFunc("GET /images", s.images)
	s.mux.HandleFunc("GET /node", s.node)
	s.mux.HandleFunc("GET /node/eviction", s.eviction)
	s.mux.HandleFunc("GET /stats/summary", s.statsSummary)
	s.installMetrics(log)
	if gatherer != nil {
		s.mux.Handle("GET /metrics", metricsHandler(gatherer, log))
	}
	return s
}

// installMetrics installs the kubelet's metrics endpoints other than
// /metrics that the source can serve: /metrics/resource always (from
// StatsSummary unless the source has a CPU-and-memory path),
// /metrics/cadvisor and /metrics/probes when the source gives them.
func (s *Server) installMetrics(log *slog.Logger) {
	resource := s.src.StatsSummary
	if r, ok := s.src.(ResourceMetricsSource); ok {
		resource = r.ResourceStats
	}
	s.mux.Handle("GET /metrics/resource", resourceMetricsHandler(resource, log))
	if c, ok := s.src.(ContainerMetricsSource); ok {
		s.mux.Handle("GET /metrics/cadvisor", cadvisorMetricsHandler(c.ContainerMetrics, clock.RealClock{}, log))
	}
	if p, ok := s.src.(ProbeMetricsSource); ok {
		if g := p.ProbeMetrics(); g != nil {
			s.mux.Handle("GET /metrics/probes", metricsHandler(g, log))
		}
	}
}

// debuggingPaths are what the kubelet's read-only server answers with
// "Debug endpoints are disabled." (its InstallDebuggingDisabledHandlers):
// everything that reads a container's output, runs something in it, or
// profiles the agent.
var debuggingPaths = []string{
	"/run/", "/exec/", "/attach/", "/portForward/", "/containerLogs/",
	"/runningpods/", "/debug/pprof/", "/logs/",
}

// installDebuggingDisabled answers the debugging paths, whatever the
// method, as the kubelet's read-only port does: 405, so that a client
// learns the path exists but is not served here, not that it mistyped.
func installDebuggingDisabled(mux *http.ServeMux) {
	disabled := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Debug endpoints are disabled.", http.StatusMethodNotAllowed)
	})
	for _, p := range debuggingPaths {
		mux.Handle(p, disabled)
	}
}

// Handler returns the API's handler, for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Run listens on the server's address and serves until ctx ends, then shuts
// down gracefully. A failure to listen (the port is taken) returns at once.
// Callers that must know the port is bound before going on can listen
// themselves and call Serve.
func (s *Server) Run(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts down: requests in flight get
// shutdownTimeout to finish, and log streams end at once, because their
// request contexts derive from ctx. Serve closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.log.Info("local API listening", "address", ln.Addr().String(), "tls", s.tls != nil)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if err != nil {
		// Requests still running past the timeout are cut off.
		srv.Close()
	}
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", serveErr)
	}
	if err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}
