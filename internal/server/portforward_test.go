package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func webSocketRequest(target string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	return req
}

func TestPortForwardPorts(t *testing.T) {
	tests := []struct {
		name    string
		req     *http.Request
		want    []int32
		wantErr string
	}{
		{name: "SPDY names ports per stream", req: upgradeRequest("POST", "/portForward/default/web")},
		{name: "SPDY ignores the API server's port query", req: upgradeRequest("POST", "/portForward/default/web?port=80&port=x")},
		{name: "WebSocket ports", req: webSocketRequest("/portForward/default/web?port=80&port=443"), want: []int32{80, 443}},
		{name: "WebSocket ports with commas", req: webSocketRequest("/portForward/default/web?port=80,8080&port=65535"), want: []int32{80, 8080, 65535}},
		{name: "WebSocket without a port", req: webSocketRequest("/portForward/default/web"), wantErr: `query parameter "port" is required`},
		{name: "WebSocket with an empty port", req: webSocketRequest("/portForward/default/web?port="), wantErr: `query parameter "port" cannot be empty`},
		{name: "not a number", req: webSocketRequest("/portForward/default/web?port=http"), wantErr: `unable to parse "http" as a port`},
		{name: "out of range", req: webSocketRequest("/portForward/default/web?port=65536"), wantErr: `unable to parse "65536" as a port`},
		{name: "zero", req: webSocketRequest("/portForward/default/web?port=80,0"), wantErr: `port "0" must be > 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := portForwardPorts(tt.req)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestPortForwardRefusals(t *testing.T) {
	tunneling := webSocketRequest("/portForward/default/web?port=80")
	tunneling.Header.Set("Sec-Websocket-Protocol", "SPDY/3.1+portforward.k8s.io")
	tests := []refusal{
		{name: "unknown pod", req: upgradeRequest("POST", "/portForward/default/nope"),
			wantCode: 404, wantBody: "pod default/nope not found"},
		{name: "no running sandbox", req: upgradeRequest("POST", "/portForward/default/pending"),
			wantCode: 404, wantBody: "has no running sandbox"},
		{name: "another pod of that name", req: upgradeRequest("POST", "/portForward/default/web/uid-old"),
			wantCode: 404, wantBody: "pod default/web with UID uid-old not found"},
		{name: "lookup fails", req: upgradeRequest("POST", "/portForward/default/broken"),
			wantCode: 500, wantBody: "status unavailable"},
		{name: "not an upgrade", req: httptest.NewRequest("POST", "/portForward/default/web", nil),
			wantCode: 400, wantBody: "port forwarding needs a connection upgrade"},
		{name: "WebSocket without ports", req: webSocketRequest("/portForward/default/web"),
			wantCode: 400, wantBody: `query parameter "port" is required`},
		{name: "SPDY tunneled over WebSocket", req: tunneling,
			wantCode: 400, wantBody: "SPDY tunneled over WebSocket is not supported"},
		{name: "wrong method", req: upgradeRequest("PUT", "/portForward/default/web"), wantCode: 405},
		{name: "path too short", req: upgradeRequest("POST", "/portForward/default"), wantCode: 404},
		{name: "sandbox gone in the runtime", req: upgradeRequest("POST", "/portForward/default/web"),
			rt:       &streamRuntime{err: status.Error(codes.NotFound, "sandbox s1 not found")},
			wantCode: 404, wantBody: "sandbox s1 not found", wantCalls: 1},
		{name: "runtime fails", req: upgradeRequest("POST", "/portForward/default/web"),
			rt:       &streamRuntime{err: status.Error(codes.Unavailable, "runtime down")},
			wantCode: 500, wantBody: "runtime down", wantCalls: 1},
		{name: "runtime answers no URL", req: upgradeRequest("POST", "/portForward/default/web"),
			rt:       &streamRuntime{url: "/portforward/token"},
			wantCode: 500, wantBody: "unusable URL", wantCalls: 1},
	}
	checkRefusals(t, tests, "http://127.0.0.1:1/portforward/token")
}

// A port-forward stream goes to the pod's sandbox, with the WebSocket
// client's ports and none for SPDY, and its connection passes through
// both ways.
func TestPortForwardProxies(t *testing.T) {
	tests := []struct {
		name    string
		request string
		want    []int32
	}{
		{name: "SPDY", request: "POST /portForward/default/web?port=80 HTTP/1.1\r\nUpgrade: SPDY/3.1\r\n"},
		{name: "SPDY with the pod's UID", request: "POST /portForward/default/web/uid-web HTTP/1.1\r\nUpgrade: SPDY/3.1\r\n"},
		{name: "WebSocket", request: "GET /portForward/default/web?port=8080,9090 HTTP/1.1\r\nUpgrade: websocket\r\n",
			want: []int32{8080, 9090}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upstream := startEchoUpstream(t)
			rt, addr, logs := startProxy(t, upstream, time.Minute)
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "%sHost: berth\r\nConnection: Upgrade\r\n\r\n", tt.request)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols {
				body, _ := io.ReadAll(resp.Body)
				t.Fatalf("got %s %q", resp.Status, body)
			}
			<-upstream.got
			io.WriteString(conn, "ping\n")
			if echo, err := br.ReadString('\n'); err != nil || echo != "ping\n" {
				t.Fatalf("echo = %q, %v", echo, err)
			}
			conn.Close()
			waitLog(t, logs, `msg="stream ended" kind=portForward pod=default/web ports=`)

			rt.mu.Lock()
			defer rt.mu.Unlock()
			if len(rt.forwards) != 1 || rt.forwards[0].PodSandboxId != "s1" || !reflect.DeepEqual(rt.forwards[0].Port, tt.want) {
				t.Errorf("the runtime was asked %v, want sandbox s1 with ports %v", rt.forwards, tt.want)
			}
		})
	}
}
