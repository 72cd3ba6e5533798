package adminapi

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// The streams the admin socket serves with WithStreaming reach their
// handler, connection upgrade included; other paths stay the admin API's.
func TestWithStreaming(t *testing.T) {
	dir, err := os.MkdirTemp("", "adminapi-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := SocketPath(dir)
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := Listen(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	// streams answers every upgrade with 101 and its path, then echoes one
	// line.
	streams := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Path: %s\r\n\r\n", r.URL.Path)
		brw.Flush()
		line, _ := brw.ReadString('\n')
		brw.WriteString(line)
		brw.Flush()
	})
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, ln, NewHandler(nil, staticPods{}, testNode, nil, WithStreaming(streams)), slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	for _, path := range []string{"/exec/default/web/app?command=sh", "/attach/default/web/app"} {
		conn, err := net.DialTimeout("unix", socket, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: berth\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n", path)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("X-Path") != strings.Split(path, "?")[0] {
			t.Fatalf("%s: got %s from %q", path, resp.Status, resp.Header.Get("X-Path"))
		}
		fmt.Fprint(conn, "ping\n")
		if echo, err := br.ReadString('\n'); echo != "ping\n" || err != nil {
			t.Errorf("%s: echo %q, %v", path, echo, err)
		}
	}

	// Without the option, the paths are unknown.
	rec := httptest.NewRecorder()
	NewHandler(nil, staticPods{}, testNode, nil).ServeHTTP(rec, httptest.NewRequest("POST", "/exec/default/web/app?command=sh", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("without WithStreaming, /exec answered %d", rec.Code)
	}
}

// WithLogs hands /containerLogs to the logs handler, query included.
func TestWithLogs(t *testing.T) {
	logs := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "log of %s?%s", r.URL.Path, r.URL.RawQuery)
	})
	rec := httptest.NewRecorder()
	NewHandler(nil, staticPods{}, testNode, nil, WithLogs(logs)).
		ServeHTTP(rec, httptest.NewRequest("GET", "/containerLogs/default/web/app?tailLines=2", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "log of /containerLogs/default/web/app?tailLines=2" {
		t.Errorf("with WithLogs: %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	NewHandler(nil, staticPods{}, testNode, nil).
		ServeHTTP(rec, httptest.NewRequest("GET", "/containerLogs/default/web/app", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("without WithLogs, /containerLogs answered %d", rec.Code)
	}
}
