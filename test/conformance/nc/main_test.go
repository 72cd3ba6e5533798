package main

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args    string
		want    options
		wantErr string
	}{
		{args: "-v -t -w 2 10.0.0.5 80", want: options{verbose: true, wait: 2 * time.Second, host: "10.0.0.5", port: "80"}},
		{args: "-v -u -w 2 svc 80", want: options{udp: true, verbose: true, wait: 2 * time.Second, host: "svc", port: "80"}},
		{args: "-w 1 -u 10.1.2.3 8081", want: options{udp: true, wait: time.Second, host: "10.1.2.3", port: "8081"}},
		{args: "-u -w 5 -p 12345 10.1.2.3 53", want: options{udp: true, wait: 5 * time.Second, srcPort: 12345, host: "10.1.2.3", port: "53"}},
		{args: "-vz h 1", want: options{verbose: true, zero: true, host: "h", port: "1"}},
		{args: "-w", wantErr: "-w needs a value"},
		{args: "-w x h 1", wantErr: "not a number"},
		{args: "-l 80", wantErr: "-l is not supported"},
		{args: "h", wantErr: "usage"},
	}
	for _, tt := range tests {
		got, err := parse(strings.Fields(tt.args))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parse %q: err %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parse %q = %+v, %v; want %+v", tt.args, got, err, tt.want)
		}
	}
}

// echoServers answer "hostName" with "pod-1" over TCP and UDP on one port.
func echoServers(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(); l.Close() })
	go func() {
		buf := make([]byte, 100)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if strings.TrimSpace(string(buf[:n])) == "hostName" {
				_, _ = pc.WriteTo([]byte("pod-1"), from)
			}
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			// Answers and keeps the connection open: nc stops on -w.
			go func() {
				_, _ = io.Copy(io.Discard, io.TeeReader(io.LimitReader(c, 9), writerFunc(func() { _, _ = c.Write([]byte("pod-1")) })))
			}()
		}
	}()
	return port
}

// writerFunc calls f on each write.
type writerFunc func()

func (f writerFunc) Write(p []byte) (int, error) { f(); return len(p), nil }

func TestRun(t *testing.T) {
	port := echoServers(t)
	for _, args := range []string{"-v -t -w 1 127.0.0.1 " + port, "-v -u -w 1 127.0.0.1 " + port} {
		o, err := parse(strings.Fields(args))
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		if code := run(o, strings.NewReader("hostName\n"), &out, &errOut); code != 0 || out.String() != "pod-1" {
			t.Errorf("nc %s: exit %d, stdout %q, stderr %q; want 0, pod-1", args, code, out.String(), errOut.String())
		}
		if !strings.Contains(errOut.String(), "succeeded") {
			t.Errorf("nc %s: -v said %q", args, errOut.String())
		}
	}
	// Nobody listens: TCP is refused, and so is UDP (port unreachable).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	for _, args := range []string{"-w 1 127.0.0.1 " + closed, "-u -w 1 127.0.0.1 " + closed} {
		o, _ := parse(strings.Fields(args))
		var out, errOut bytes.Buffer
		if code := run(o, strings.NewReader("hostName\n"), &out, &errOut); code != 1 || out.Len() != 0 {
			t.Errorf("nc %s to a closed port: exit %d, stdout %q; want 1 and nothing", args, code, out.String())
		}
	}
}
