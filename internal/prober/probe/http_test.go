package probe

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func httpProbe(port int, path string) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{
		HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(port))},
	}}
}

func TestHTTPStatusAndRedirects(t *testing.T) {
	var loops atomic.Int32
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	port := portOf(t, srv.URL)
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "fine") })
	mux.HandleFunc("/empty", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/found", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		// Same port, another host name: not followed.
		http.Redirect(w, r, fmt.Sprintf("http://localhost:%d/ok", port), http.StatusMovedPermanently)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		loops.Add(1)
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no such page", http.StatusNotFound) })
	mux.HandleFunc("/broken", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "database password is hunter2", http.StatusInternalServerError)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, strings.Repeat("x", 1<<20)) })

	r := NewRunner(nil, testUserAgent)
	for _, tc := range []struct {
		path    string
		want    Result
		out     string // exact output, unless prefix is set
		prefix  bool
		outSize int // when set, only the output's length is checked
	}{
		{path: "/ok", want: Success, out: "fine"},
		{path: "/empty", want: Success, out: ""},
		{path: "/found", want: Success, out: "fine"},
		{path: "/elsewhere", want: Warning, out: "Probe terminated redirects, Response body: <a href=", prefix: true},
		{path: "/missing", want: Failure, out: "HTTP probe failed with statuscode: 404"},
		{path: "/broken", want: Failure, out: "HTTP probe failed with statuscode: 500"},
		{path: "/loop", want: Failure, out: `Get "/loop": stopped after 10 redirects`},
		{path: "/big", want: Success, outSize: maxOutput},
	} {
		t.Run(tc.path, func(t *testing.T) {
			got := runProbe(r, httpProbe(port, tc.path), nil)
			if got.err != nil || got.res != tc.want {
				t.Fatalf("got %v, %q, %v; want %v", got.res, got.out, got.err, tc.want)
			}
			switch {
			case tc.outSize > 0:
				if len(got.out) != tc.outSize {
					t.Errorf("output is %d bytes, want %d", len(got.out), tc.outSize)
				}
			case tc.prefix:
				if !strings.HasPrefix(got.out, tc.out) {
					t.Errorf("output %q, want it to start with %q", got.out, tc.out)
				}
			case got.out != tc.out:
				t.Errorf("output %q, want %q", got.out, tc.out)
			}
		})
	}
	// The first request and 9 redirects; the 10th redirect is refused.
	if n := loops.Load(); n != maxRedirects {
		t.Errorf("redirect loop was requested %d times, want %d", n, maxRedirects)
	}
}

func TestHTTPRequestHeaders(t *testing.T) {
	seen := make(chan *http.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen <- r }))
	t.Cleanup(srv.Close)
	port := portOf(t, srv.URL)
	r := NewRunner(nil, testUserAgent)

	t.Run("defaults", func(t *testing.T) {
		got := runProbe(r, httpProbe(port, "/healthz?verbose=1"), nil)
		if got.res != Success || got.err != nil {
			t.Fatalf("got %v, %q, %v", got.res, got.out, got.err)
		}
		req := <-seen
		if req.URL.Path != "/healthz" || req.URL.RawQuery != "verbose=1" {
			t.Errorf("request URI %q", req.RequestURI)
		}
		if ua := req.UserAgent(); ua != testUserAgent {
			t.Errorf("User-Agent %q, want %q", ua, testUserAgent)
		}
		if a := req.Header.Get("Accept"); a != "*/*" {
			t.Errorf("Accept %q, want */*", a)
		}
		if ae := req.Header.Get("Accept-Encoding"); ae != "" {
			t.Errorf("Accept-Encoding %q, want none", ae)
		}
		if req.Host != fmt.Sprintf("127.0.0.1:%d", port) {
			t.Errorf("Host %q", req.Host)
		}
		if !req.Close {
			t.Error("request does not ask to close the connection: keep-alive is on")
		}
	})

	t.Run("set by the probe", func(t *testing.T) {
		p := httpProbe(port, "/")
		p.HTTPGet.HTTPHeaders = []v1.HTTPHeader{
			{Name: "X-Probe", Value: "a"},
			{Name: "x-probe", Value: "b"},
			{Name: "Host", Value: "web.example"},
			{Name: "User-Agent", Value: "my-checker/2"},
			{Name: "Accept", Value: ""},
		}
		got := runProbe(r, p, nil)
		if got.res != Success || got.err != nil {
			t.Fatalf("got %v, %q, %v", got.res, got.out, got.err)
		}
		req := <-seen
		if v := req.Header.Values("X-Probe"); len(v) != 2 || v[0] != "a" || v[1] != "b" {
			t.Errorf("X-Probe %q, want [a b]", v)
		}
		if req.Host != "web.example" {
			t.Errorf("Host %q, want web.example", req.Host)
		}
		if ua := req.UserAgent(); ua != "my-checker/2" {
			t.Errorf("User-Agent %q", ua)
		}
		if _, ok := req.Header["Accept"]; ok {
			t.Errorf("Accept %q, want none: an empty Accept removes it", req.Header.Get("Accept"))
		}
	})
}

func TestHTTPPortsHostsAndSchemes(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "plain") }))
	t.Cleanup(plain.Close)
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "secure") }))
	t.Cleanup(secure.Close)
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{
		{Name: "web", ContainerPort: int32(portOf(t, plain.URL))},
		{Name: "web-tls", ContainerPort: int32(portOf(t, secure.URL))},
	}}
	r := NewRunner(nil, testUserAgent)
	named := func(name string, scheme v1.URIScheme) *v1.HTTPGetAction {
		return &v1.HTTPGetAction{Port: intstr.FromString(name), Scheme: scheme}
	}

	for _, tc := range []struct {
		name   string
		action *v1.HTTPGetAction
		podIP  string
		want   Result
		out    string
		errHas string
	}{
		{name: "named port", action: named("web", ""), podIP: "127.0.0.1", want: Success, out: "plain"},
		{name: "https, self-signed", action: named("web-tls", v1.URISchemeHTTPS), podIP: "127.0.0.1", want: Success, out: "secure"},
		{name: "explicit host, no pod IP", action: &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromString("web")}, want: Success, out: "plain"},
		{name: "unknown port name", action: named("metrics", ""), podIP: "127.0.0.1", errHas: `httpGet.port: port "metrics" not found`},
		{name: "port out of range", action: &v1.HTTPGetAction{Port: intstr.FromInt32(70000)}, podIP: "127.0.0.1", errHas: "invalid port number 70000"},
		{name: "no host and no pod IP", action: named("web", ""), errHas: "httpGet.host"},
		{name: "bad scheme", action: named("web", "FTP"), podIP: "127.0.0.1", errHas: `httpGet.scheme: "FTP"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: tc.action}}
			res, out, err := r.Run(t.Context(), p, testPod, c, "cid", tc.podIP)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) || res != Unknown {
					t.Fatalf("got %v, %q, %v; want Unknown and an error containing %q", res, out, err, tc.errHas)
				}
				return
			}
			if err != nil || res != tc.want || out != tc.out {
				t.Fatalf("got %v, %q, %v; want %v, %q", res, out, err, tc.want, tc.out)
			}
		})
	}
}

// TestHTTPMisbehavingTargets: whatever the target does, the probe fails
// within its timeout.
func TestHTTPMisbehavingTargets(t *testing.T) {
	t.Parallel()
	r := NewRunner(nil, testUserAgent)
	silent := silentListener(t)
	garbage := serveRaw(t, func(c net.Conn) {
		// Answer the request (not before: that is another error) with noise.
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			c.Write([]byte("this is not HTTP\r\n\r\n"))
		}
		c.Close()
	})
	reset := serveRaw(t, func(c net.Conn) {
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	})
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the body never ends
	}))
	t.Cleanup(stalled.Close)

	for _, tc := range []struct {
		name    string
		port    int
		outHas  string
		timeout bool
	}{
		{name: "never answers", port: portOf(t, silent.Addr().String()), outHas: "Client.Timeout exceeded", timeout: true},
		{name: "body never ends", port: portOf(t, stalled.URL), outHas: "HTTP probe failed reading the response body", timeout: true},
		{name: "garbage", port: portOf(t, garbage.Addr().String()), outHas: "malformed HTTP"},
		{name: "reset", port: portOf(t, reset.Addr().String()), outHas: `Get "http://127.0.0.1:`},
		{name: "refused", port: closedPort(t), outHas: "connect: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := runProbe(r, httpProbe(tc.port, "/"), nil)
			t.Logf("%v after %v: %s", got.res, got.took, got.out)
			if got.err != nil || got.res != Failure || !strings.Contains(got.out, tc.outHas) {
				t.Fatalf("got %v, %q, %v; want Failure with %q", got.res, got.out, got.err, tc.outHas)
			}
			if tc.timeout {
				assertTimedOut(t, got.took, time.Second)
			} else if got.took > 500*time.Millisecond {
				t.Errorf("took %v to fail", got.took)
			}
		})
	}
}

// Every request of a probe asks the server to close the connection, the
// redirected ones too (http.Client makes those without Close set).
func TestHTTPRedirectedRequestCloses(t *testing.T) {
	closes := make(chan bool, 2)
	mux := http.NewServeMux()
	mux.HandleFunc("/from", func(w http.ResponseWriter, r *http.Request) {
		closes <- r.Close
		http.Redirect(w, r, "/to", http.StatusFound)
	})
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		closes <- r.Close
		fmt.Fprint(w, "there")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	got := runProbe(NewRunner(nil, testUserAgent), httpProbe(portOf(t, srv.URL), "/from"), nil)
	if got.res != Success || got.out != "there" {
		t.Fatalf("got %v, %q, %v; want the redirect followed", got.res, got.out, got.err)
	}
	for i := range 2 {
		if !<-closes {
			t.Errorf("request %d did not ask to close the connection", i+1)
		}
	}
}

// An informational response before the real one is skipped, as
// http.Transport skips it.
func TestHTTPSkipsInformationalResponses(t *testing.T) {
	ln := serveRaw(t, func(c net.Conn) {
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		c.Write([]byte("HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	})
	got := runProbe(NewRunner(nil, testUserAgent), httpProbe(portOf(t, ln.Addr().String()), "/"), nil)
	if got.res != Success || got.out != "ok" {
		t.Fatalf("got %v, %q, %v; want success with the final response's body", got.res, got.out, got.err)
	}
}

// BenchmarkHTTPProbe is one http probe against a local server, through
// the probes' own round tripper and through the http.Transport it
// replaced for plain HTTP (the server's cost is in both).
func BenchmarkHTTPProbe(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	b.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	_, portStr, _ := net.SplitHostPort(u.Host)
	port, _ := strconv.Atoi(portStr)
	p := httpProbe(port, "/healthz")
	for _, tc := range []struct {
		name  string
		plain bool
	}{{"plain", true}, {"http.Transport", false}} {
		b.Run(tc.name, func(b *testing.B) {
			r := NewRunner(nil, testUserAgent)
			if !tc.plain {
				r.transport = newTransport(r.dialer)
			}
			b.ReportAllocs()
			for b.Loop() {
				if res, out, err := r.Run(context.Background(), p, testPod, &v1.Container{Name: "app"}, "cid", "127.0.0.1"); res != Success {
					b.Fatalf("%v %q %v", res, out, err)
				}
			}
		})
	}
}
