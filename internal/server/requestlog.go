package server

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/authn"
)

// logRequests logs every request once it is answered: who called (the
// authenticated user on the secure API, always the remote address), what,
// and the answer, at the level requestLevel gives.
func logRequests(next http.Handler, log *slog.Logger, clk clock.PassiveClock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := clk.Now()
		rec := &statusRecorder{ResponseWriter: w}
		// The guard hands the handlers a request of its own; it leaves
		// the caller here for this log.
		var caller authn.Caller
		next.ServeHTTP(rec, r.WithContext(authn.WithCaller(r.Context(), &caller)))
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("uri", r.URL.RequestURI()),
			slog.Int("status", rec.status()),
			slog.Duration("duration", clk.Since(start).Round(time.Microsecond)),
			slog.String("remote", r.RemoteAddr),
		}
		if caller.Known {
			attrs = append(attrs, slog.String("user", caller.User.Name), slog.String("authn", caller.User.Method))
		}
		log.LogAttrs(r.Context(), requestLevel(r.Method, r.URL.Path, rec.status()), "request", attrs...)
	})
}

// requestLevel is debug for a read that succeeded: monitors, dashboards,
// metrics-server and the API server poll /pods, /stats, /metrics and
// /healthz every few seconds, and a line each drowns what matters (the
// kubelet logs its requests only from -v=3). What changes a container or
// reaches into one (exec, attach, port-forward, run) and every refused or
// failed request log at info.
func requestLevel(method, path string, status int) slog.Level {
	if status >= 400 || isAction(path) {
		return slog.LevelInfo
	}
	if method == http.MethodGet || method == http.MethodHead {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

func isAction(path string) bool {
	for _, p := range []string{"/exec/", "/attach/", "/portForward/", "/run/"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// statusRecorder remembers the status a handler answered with; Unwrap lets
// http.ResponseController still reach the connection's Flush and Hijack,
// which log streams and exec upgrades need.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) status() int {
	if s.code == 0 {
		// Nothing written: net/http answers 200, or the connection was
		// hijacked.
		return http.StatusOK
	}
	return s.code
}
