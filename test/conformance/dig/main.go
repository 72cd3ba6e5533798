// Command dig is a stand-in for BIND's dig in the conformance run's agnhost
// and glibc-dns-testing images, which have none of their own (upstream's
// get alpine's and Debian's bind-tools). It asks the queries the e2e
// suite's DNS specs ask (test/e2e/network/dns_common.go), with the options
// they use: @server, -p port, -x address, a record type (A, AAAA, CNAME,
// SRV, PTR, ...), +short, +tcp / +notcp, +search and +noall +answer.
//
// Like dig, it prints the answer section (+short: only the records' data)
// and exits 0 whenever a server answered, whatever the answer's code; 9
// when none did, 1 on a usage error. Unlike dig, it never prints the
// header, question or statistics sections: without +short it prints what
// `+noall +answer` prints.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// query is what the command line asks.
type query struct {
	server string // empty: the first nameserver of resolv.conf
	port   int
	name   string
	qtype  uint16
	short  bool
	tcp    bool
	search bool // try resolv.conf's search list as its ndots says
}

const resolvConf = "/etc/resolv.conf"

func main() {
	q, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dig:", err)
		os.Exit(1)
	}
	os.Exit(run(q, resolvConf, os.Stdout, os.Stderr))
}

// parse reads dig's command line: options, a name and a type, in any
// order, as dig takes them.
func parse(args []string) (query, error) {
	q := query{port: 53, qtype: dns.TypeA}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "@"):
			q.server = a[1:]
		case a == "-p" || a == "-x":
			if i+1 >= len(args) {
				return q, fmt.Errorf("%s needs a value", a)
			}
			i++
			if err := q.setDash(a, args[i]); err != nil {
				return q, err
			}
		case strings.HasPrefix(a, "+"):
			if err := q.setPlus(a[1:]); err != nil {
				return q, err
			}
		case strings.HasPrefix(a, "-"):
			return q, fmt.Errorf("option %s is not supported by this stand-in", a)
		default:
			// As dig does, a word that names a type is the type,
			// before or after the name.
			if t, ok := dns.StringToType[strings.ToUpper(a)]; ok {
				q.qtype = t
				continue
			}
			if strings.EqualFold(a, "IN") {
				continue
			}
			q.name = a
		}
	}
	if q.name == "" {
		return q, errors.New("no name to look up")
	}
	return q, nil
}

func (q *query) setDash(flag, v string) error {
	if flag == "-p" {
		p, err := strconv.Atoi(v)
		if err != nil || p <= 0 || p > 65535 {
			return fmt.Errorf("-p %q: not a port", v)
		}
		q.port = p
		return nil
	}
	rev, err := dns.ReverseAddr(v)
	if err != nil {
		return fmt.Errorf("-x %q: %w", v, err)
	}
	q.name, q.qtype = rev, dns.TypePTR
	return nil
}

// setPlus sets a +option. Those that only choose what dig prints besides
// the answer section are accepted and change nothing: this dig prints no
// other section.
func (q *query) setPlus(opt string) error {
	switch opt {
	case "short":
		q.short = true
	case "tcp", "vc":
		q.tcp = true
	case "notcp", "novc":
		q.tcp = false
	case "search":
		q.search = true
	case "nosearch":
		q.search = false
	case "noall", "answer", "nocomments", "nostats", "noquestion", "nocmd", "recurse":
	default:
		return fmt.Errorf("option +%s is not supported by this stand-in", opt)
	}
	return nil
}

// candidates are the names to ask, in order: with +search, resolv.conf's
// search list applied as its ndots says; else the name alone.
func candidates(q query, conf *dns.ClientConfig) []string {
	if !q.search || conf == nil || dns.IsFqdn(q.name) {
		return []string{dns.Fqdn(q.name)}
	}
	return conf.NameList(q.name)
}

// run asks each candidate name until one has answers, prints the answer
// and returns the exit code.
func run(q query, confPath string, stdout, stderr io.Writer) int {
	conf, confErr := dns.ClientConfigFromFile(confPath)
	server := q.server
	if server == "" {
		if confErr != nil || len(conf.Servers) == 0 {
			fmt.Fprintf(stderr, "dig: no server given and none in %s: %v\n", confPath, confErr)
			return 9
		}
		server = conf.Servers[0]
	}
	addr := joinHostPort(server, q.port)
	var last *dns.Msg
	for _, name := range candidates(q, conf) {
		resp, err := exchange(addr, name, q.qtype, q.tcp)
		if err != nil {
			fmt.Fprintf(stderr, "dig: %s: %v\n", addr, err)
			continue
		}
		last = resp
		if resp.Rcode == dns.RcodeSuccess && len(resp.Answer) > 0 {
			break
		}
	}
	if last == nil {
		fmt.Fprintf(stdout, ";; connection timed out; no servers could be reached\n")
		return 9
	}
	for _, rr := range last.Answer {
		fmt.Fprintln(stdout, format(rr, q.short))
	}
	return 0
}

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// exchange asks addr once over TCP, or over UDP with dig's three tries and
// a retry over TCP when the answer was truncated.
func exchange(addr, name string, qtype uint16, tcp bool) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = true
	if tcp {
		resp, _, err := (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(m, addr)
		return resp, err
	}
	var err error
	for range 3 {
		var resp *dns.Msg
		resp, _, err = (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).Exchange(m, addr)
		if err == nil && resp.Truncated {
			resp, _, err = (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(m, addr)
		}
		if err == nil {
			return resp, nil
		}
	}
	return nil, err
}

// format is rr as dig prints it: the whole record, or with +short its data
// alone (an A record's address, a CNAME's target, an SRV's priority,
// weight, port and target).
func format(rr dns.RR, short bool) string {
	s := rr.String()
	if !short {
		return s
	}
	return strings.TrimPrefix(s, rr.Header().String())
}
