// Command curl is a stand-in for curl in the conformance run's agnhost
// image, which has no curl of its own (upstream's gets alpine's). It does
// the GETs the e2e suite's commands ask of curl, with the flags they use:
// -s, -q and -g (accepted, nothing to do), -i (print the status line and
// headers first), -o FILE, -w '%{http_code}', --max-time and
// --connect-timeout (seconds), --interface (a local address or an
// interface's name: the connection's source). Like curl without -f, an HTTP error status
// is still success; a failed connection exits 7, a timeout 28.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

type options struct {
	url, out, format string
	iface            string // --interface: the source address's IP or device
	include          bool
	maxTime, connect time.Duration
}

func main() {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "curl:", err)
		os.Exit(2)
	}
	os.Exit(get(o))
}

func parse(args []string) (options, error) {
	o := options{out: "-"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", a)
			}
			i++
			return args[i], nil
		}
		var err error
		switch a {
		case "-s", "-q", "-g", "--silent", "--globoff":
		case "-i", "--include":
			o.include = true
		case "-o", "--output":
			o.out, err = value()
		case "-w", "--write-out":
			o.format, err = value()
		case "--interface":
			o.iface, err = value()
		case "-m", "--max-time", "--connect-timeout":
			var v string
			if v, err = value(); err == nil {
				err = setSeconds(&o, a, v)
			}
		default:
			if strings.HasPrefix(a, "-") {
				return o, fmt.Errorf("option %s is not supported by this stand-in", a)
			}
			o.url = a
		}
		if err != nil {
			return o, err
		}
	}
	if o.url == "" {
		return o, errors.New("no URL")
	}
	if !strings.Contains(o.url, "://") {
		o.url = "http://" + o.url
	}
	return o, nil
}

func setSeconds(o *options, flag, v string) error {
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return fmt.Errorf("%s %q: %w", flag, v, err)
	}
	d := time.Duration(secs * float64(time.Second))
	if flag == "--connect-timeout" {
		o.connect = d
	} else {
		o.maxTime = d
	}
	return nil
}

// get does the request and writes what curl would; it returns the exit
// code.
func get(o options) int {
	ctx := context.Background()
	if o.maxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.maxTime)
		defer cancel()
	}
	dialer := &net.Dialer{Timeout: o.connect}
	if o.iface != "" {
		ip, err := sourceIP(o.iface)
		if err != nil {
			fmt.Fprintln(os.Stderr, "curl:", err)
			return 45 // curl's "interface error"
		}
		dialer.LocalAddr = &net.TCPAddr{IP: ip}
	}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "curl:", err)
		return 3
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "curl:", err)
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			return 28
		}
		return 7
	}
	defer resp.Body.Close()
	out := io.Writer(os.Stdout)
	if o.out != "-" {
		f, err := os.Create(o.out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "curl:", err)
			return 23
		}
		defer f.Close()
		out = f
	}
	if o.include {
		fmt.Fprintf(out, "%s %s\r\n", resp.Proto, resp.Status)
		resp.Header.Write(out)
		fmt.Fprint(out, "\r\n")
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		fmt.Fprintln(os.Stderr, "curl:", err)
		return 56
	}
	fmt.Fprint(os.Stdout, strings.ReplaceAll(o.format, "%{http_code}", strconv.Itoa(resp.StatusCode)))
	return 0
}

// sourceIP is --interface's address: the IP given, or the first address of
// the device named.
func sourceIP(iface string) (net.IP, error) {
	if ip := net.ParseIP(iface); ip != nil {
		return ip, nil
	}
	dev, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("--interface %s: %w", iface, err)
	}
	addrs, err := dev.Addrs()
	if err != nil {
		return nil, fmt.Errorf("--interface %s: %w", iface, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			return n.IP, nil
		}
	}
	return nil, fmt.Errorf("--interface %s: the device has no address", iface)
}
