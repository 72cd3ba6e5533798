// Command nc is a stand-in for OpenBSD's netcat in the conformance run's
// agnhost image (upstream's installs alpine's netcat-openbsd; busybox's
// small nc has no -u, -v or -t). It does what the e2e suite's commands
// ask of nc: `echo hostName | nc [-v] [-t|-u] [-w SECS] [-p PORT] HOST
// PORT` sends its input to HOST:PORT over TCP (or, with -u, as UDP
// datagrams) and prints what comes back until the peer closes or, with -w,
// nothing came for SECS seconds; -z only connects. As netcat does, it exits
// 0 unless the connection failed (refused, unreachable, timed out: 1); -v
// says so on stderr. -t (answer telnet negotiation) and -n (no name
// lookups) are accepted and do nothing: the suite's peers speak no telnet.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

type options struct {
	udp, verbose, zero bool
	wait               time.Duration // -w: connect and idle timeout; 0 for none
	srcPort            int           // -p
	host, port         string
}

func main() {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nc:", err)
		os.Exit(1)
	}
	os.Exit(run(o, os.Stdin, os.Stdout, os.Stderr))
}

func parse(args []string) (options, error) {
	var o options
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		// Flags may be grouped (-vz), and -w and -p take the next word.
		for j := 1; j < len(a); j++ {
			switch c := a[j]; c {
			case 'u':
				o.udp = true
			case 'v':
				o.verbose = true
			case 'z':
				o.zero = true
			case 't', 'n':
			case 'w', 'p':
				if i+1 >= len(args) || j != len(a)-1 {
					return o, fmt.Errorf("-%c needs a value", c)
				}
				i++
				n, err := strconv.Atoi(args[i])
				if err != nil || n < 0 {
					return o, fmt.Errorf("-%c %q: not a number", c, args[i])
				}
				if c == 'w' {
					o.wait = time.Duration(n) * time.Second
				} else {
					o.srcPort = n
				}
			default:
				return o, fmt.Errorf("option -%c is not supported by this stand-in", c)
			}
		}
	}
	if len(pos) != 2 {
		return o, errors.New("usage: nc [-tuvzn] [-w secs] [-p port] host port")
	}
	o.host, o.port = pos[0], pos[1]
	return o, nil
}

func (o options) network() string {
	if o.udp {
		return "udp"
	}
	return "tcp"
}

// run connects, copies in to the peer and the peer's answers to out, and
// returns the exit code.
func run(o options, in io.Reader, out, errOut io.Writer) int {
	d := net.Dialer{Timeout: o.wait}
	if o.srcPort > 0 {
		if o.udp {
			d.LocalAddr = &net.UDPAddr{Port: o.srcPort}
		} else {
			d.LocalAddr = &net.TCPAddr{Port: o.srcPort}
		}
	}
	addr := net.JoinHostPort(o.host, o.port)
	conn, err := d.Dial(o.network(), addr)
	if err != nil {
		fmt.Fprintf(errOut, "nc: connect to %s port %s (%s) failed: %v\n", o.host, o.port, o.network(), err)
		return 1
	}
	defer conn.Close()
	if o.verbose {
		fmt.Fprintf(errOut, "Connection to %s %s port [%s/*] succeeded!\n", o.host, o.port, o.network())
	}
	if o.zero {
		return 0
	}
	// The input goes out as it comes; its end does not end the exchange
	// (netcat without -N keeps reading what the peer says).
	go func() { _, _ = io.Copy(conn, in) }()
	return readAll(conn, o.wait, out, errOut)
}

// readAll copies conn to out until the peer closes or, with an idle
// timeout, nothing came for that long. A refused datagram (ICMP port
// unreachable) is a failure, as with netcat.
func readAll(conn net.Conn, idle time.Duration, out, errOut io.Writer) int {
	buf := make([]byte, 64<<10)
	for {
		if idle > 0 {
			_ = conn.SetReadDeadline(time.Now().Add(idle))
		}
		n, err := conn.Read(buf)
		if n > 0 {
			_, _ = out.Write(buf[:n])
		}
		var ne net.Error
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.As(err, &ne) && ne.Timeout():
			return 0
		default:
			fmt.Fprintf(errOut, "nc: %v\n", err)
			return 1
		}
	}
}
