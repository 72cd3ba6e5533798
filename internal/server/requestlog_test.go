package server

import (
	"log/slog"
	"net/http"
	"testing"
)

func TestRequestLevel(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		status       int
		want         slog.Level
	}{
		{"GET", "/pods", 200, slog.LevelDebug},
		{"GET", "/stats/summary", 200, slog.LevelDebug},
		{"GET", "/metrics/resource", 200, slog.LevelDebug},
		{"HEAD", "/healthz", 200, slog.LevelDebug},
		{"GET", "/containerLogs/ns/p/c", 200, slog.LevelDebug},
		{"GET", "/pods", 500, slog.LevelInfo},
		{"GET", "/pods", 401, slog.LevelInfo},
		{"GET", "/stats/summary", 403, slog.LevelInfo},
		// Websocket exec and attach are GETs: still actions.
		{"GET", "/exec/ns/p/c", http.StatusSwitchingProtocols, slog.LevelInfo},
		{"POST", "/exec/ns/p/c", 200, slog.LevelInfo},
		{"POST", "/attach/ns/p/c", 200, slog.LevelInfo},
		{"POST", "/portForward/ns/p", 200, slog.LevelInfo},
		{"POST", "/run/ns/p/c", 200, slog.LevelInfo},
		{"PUT", "/pods", 405, slog.LevelInfo},
		{"POST", "/something", 200, slog.LevelInfo},
	} {
		if got := requestLevel(tc.method, tc.path, tc.status); got != tc.want {
			t.Errorf("requestLevel(%s %s, %d) = %v, want %v", tc.method, tc.path, tc.status, got, tc.want)
		}
	}
}
