package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// HealthCheck is one of berth's health checks: the runtime answers, the
// PLEG relists, the sync loop turns.
type HealthCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// healthzTimeout bounds one /healthz answer: a check that hangs is a
// failed check, not a hung probe.
const healthzTimeout = 5 * time.Second

// ping always passes, as the API server's does: it says the HTTP server
// itself answers.
func ping(context.Context) error { return nil }

// healthz answers like the API server's and the kubelet's /healthz: "ok",
// or with ?verbose one "[+]name ok" or "[-]name failed: why" line per
// check; a failure is a 500 with the lines. ?exclude=name leaves a check
// out.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	checks := append([]HealthCheck{{Name: "ping", Check: ping}}, s.src.HealthChecks()...)
	q := r.URL.Query()
	for _, name := range q["exclude"] {
		i := slices.IndexFunc(checks, func(c HealthCheck) bool { return c.Name == name })
		if i < 0 {
			http.Error(w, fmt.Sprintf("exclude: no health check %q; the checks are %s", name, checkNames(checks)),
				http.StatusBadRequest)
			return
		}
		checks = slices.Delete(checks, i, i+1)
	}
	s.writeHealth(w, r, checks, q.Has("verbose"))
}

// healthCheck answers /healthz/{check}: that check alone.
func (s *Server) healthCheck(w http.ResponseWriter, r *http.Request) {
	checks := append([]HealthCheck{{Name: "ping", Check: ping}}, s.src.HealthChecks()...)
	name := r.PathValue("check")
	i := slices.IndexFunc(checks, func(c HealthCheck) bool { return c.Name == name })
	if i < 0 {
		http.Error(w, fmt.Sprintf("no health check %q; the checks are %s", name, checkNames(checks)), http.StatusNotFound)
		return
	}
	s.writeHealth(w, r, checks[i:i+1], r.URL.Query().Has("verbose"))
}

func (s *Server) writeHealth(w http.ResponseWriter, r *http.Request, checks []HealthCheck, verbose bool) {
	ctx, cancel := context.WithTimeout(r.Context(), healthzTimeout)
	defer cancel()
	report, failed := runChecks(ctx, checks)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch {
	case failed:
		s.log.Warn("health check failed", "report", strings.ReplaceAll(report, "\n", "; "))
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "%shealthz check failed\n", report)
	case verbose:
		fmt.Fprintf(w, "%shealthz check passed\n", report)
	default:
		w.Write([]byte("ok"))
	}
}

// runChecks runs the checks in order and reports one line each.
func runChecks(ctx context.Context, checks []HealthCheck) (report string, failed bool) {
	var b strings.Builder
	for _, c := range checks {
		if err := c.Check(ctx); err != nil {
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.Name, err)
			failed = true
			continue
		}
		fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
	}
	return b.String(), failed
}

func checkNames(checks []HealthCheck) string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}
