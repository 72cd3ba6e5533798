package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args    string
		want    query
		wantErr string
	}{
		// dns_common.go's probe commands.
		{args: "+notcp +noall +answer +search kubernetes.default A",
			want: query{port: 53, name: "kubernetes.default", qtype: dns.TypeA, search: true}},
		{args: "+tcp +noall +answer +search _http._tcp.svc.ns.svc SRV",
			want: query{port: 53, name: "_http._tcp.svc.ns.svc", qtype: dns.TypeSRV, tcp: true, search: true}},
		{args: "+short foo.ns.svc.cluster.local CNAME",
			want: query{port: 53, name: "foo.ns.svc.cluster.local", qtype: dns.TypeCNAME, short: true}},
		// runDig's targets.
		{args: "+short @10.1.2.3 -p 10053 my.test",
			want: query{server: "10.1.2.3", port: 10053, name: "my.test", qtype: dns.TypeA, short: true}},
		{args: "+short AAAA my.test",
			want: query{port: 53, name: "my.test", qtype: dns.TypeAAAA, short: true}},
		{args: "+short -x 10.0.0.10",
			want: query{port: 53, name: "10.0.0.10.in-addr.arpa.", qtype: dns.TypePTR, short: true}},
		{args: "+short +search notexistname",
			want: query{port: 53, name: "notexistname", qtype: dns.TypeA, short: true, search: true}},
		{args: "+short", wantErr: "no name"},
		{args: "-p", wantErr: "-p needs a value"},
		{args: "-p x name", wantErr: "not a port"},
		{args: "-x nonsense", wantErr: "-x"},
		{args: "+trace name", wantErr: "+trace is not supported"},
		{args: "-4 name", wantErr: "-4 is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			got, err := parse(strings.Fields(tt.args))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parse: err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parse = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestCandidates(t *testing.T) {
	conf := &dns.ClientConfig{Search: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local"}, Ndots: 5}
	tests := []struct {
		q    query
		want []string
	}{
		{query{name: "kubernetes.default"}, []string{"kubernetes.default."}},
		{query{name: "kubernetes.default", search: true}, []string{
			"kubernetes.default.ns.svc.cluster.local.", "kubernetes.default.svc.cluster.local.",
			"kubernetes.default.cluster.local.", "kubernetes.default."}},
		{query{name: "a.b.", search: true}, []string{"a.b."}},
		{query{name: "a.b.c.d.e.f", search: true}, []string{
			"a.b.c.d.e.f.", "a.b.c.d.e.f.ns.svc.cluster.local.", "a.b.c.d.e.f.svc.cluster.local.", "a.b.c.d.e.f.cluster.local."}},
	}
	for _, tt := range tests {
		if got := candidates(tt.q, conf); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("candidates(%+v) = %q, want %q", tt.q, got, tt.want)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		rr          string
		short, long string
	}{
		{"a.cluster.local. 5 IN A 10.0.0.1", "10.0.0.1", "a.cluster.local.\t5\tIN\tA\t10.0.0.1"},
		{"e.cluster.local. 5 IN CNAME foo.example.com.", "foo.example.com.", "e.cluster.local.\t5\tIN\tCNAME\tfoo.example.com."},
		{"_http._tcp.s.cluster.local. 5 IN SRV 0 100 80 s.cluster.local.", "0 100 80 s.cluster.local.", "_http._tcp.s.cluster.local.\t5\tIN\tSRV\t0 100 80 s.cluster.local."},
	}
	for _, tt := range tests {
		rr, err := dns.NewRR(tt.rr)
		if err != nil {
			t.Fatal(err)
		}
		if got := format(rr, true); got != tt.short {
			t.Errorf("format(%q, short) = %q, want %q", tt.rr, got, tt.short)
		}
		if got := format(rr, false); got != tt.long {
			t.Errorf("format(%q) = %q, want %q", tt.rr, got, tt.long)
		}
	}
}

// serve answers A queries for web.ns.svc.cluster.local. and NXDOMAIN for
// everything else, over UDP and TCP on one port of 127.0.0.1.
func serve(t *testing.T) int {
	t.Helper()
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if q := r.Question[0]; q.Name == "web.ns.svc.cluster.local." && q.Qtype == dns.TypeA {
			rr, _ := dns.NewRR(q.Name + " 5 IN A 10.0.0.42")
			m.Answer = append(m.Answer, rr)
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	udp := &dns.Server{PacketConn: pc, Handler: handler}
	tcp := &dns.Server{Listener: l, Handler: handler}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	t.Cleanup(func() { _ = udp.Shutdown(); _ = tcp.Shutdown() })
	return port
}

func TestRun(t *testing.T) {
	port := serve(t)
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	body := "nameserver 127.0.0.1\nsearch ns.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	p := strconv.Itoa(port)
	tests := []struct {
		args, want string
		code       int
	}{
		{"+notcp +noall +answer +search web A -p " + p, "web.ns.svc.cluster.local.\t5\tIN\tA\t10.0.0.42\n", 0},
		{"+tcp +noall +answer +search web.ns.svc A -p " + p, "web.ns.svc.cluster.local.\t5\tIN\tA\t10.0.0.42\n", 0},
		{"+short @127.0.0.1 -p " + p + " web.ns.svc.cluster.local", "10.0.0.42\n", 0},
		// No answer is no output, and still exit 0, as with dig.
		{"+short -p " + p + " web", "", 0},
		{"+notcp +noall +answer +search nothing -p " + p, "", 0},
	}
	for _, tt := range tests {
		q, err := parse(strings.Fields(tt.args))
		if err != nil {
			t.Fatalf("parse %q: %v", tt.args, err)
		}
		var out, errOut bytes.Buffer
		if code := run(q, conf, &out, &errOut); code != tt.code || out.String() != tt.want {
			t.Errorf("dig %s: exit %d, output %q (stderr %q); want %d, %q", tt.args, code, out.String(), errOut.String(), tt.code, tt.want)
		}
	}
}

func TestRunNoServer(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	var out, errOut bytes.Buffer
	if code := run(query{port: 53, name: "x", qtype: dns.TypeA}, conf, &out, &errOut); code != 9 {
		t.Errorf("exit %d without a resolv.conf, want 9 (stderr %q)", code, errOut.String())
	}
}
