// Command hostpathplugin stands in for the proxy mode of
// registry.k8s.io/sig-storage/hostpathplugin, the only mode the e2e
// suite's DRA specs use: the test process execs `/hostpathplugin --v=5
// --endpoint=<unix socket> --proxy-endpoint=tcp://:<port>` in its driver
// pod and serves the kubelet plugin itself, through port-forward
// connections to <port> that it opens ahead of any client (up to ten at
// once, test/e2e/storage/drivers/proxy/portproxy.go). Each connection
// accepted on the unix socket (from the kubelet) is paired with the next
// one accepted on TCP, and bytes are piped both ways until either side
// closes; then both are closed. Every other mode of upstream's program (a
// CSI driver) is refused.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

type options struct {
	endpoint string // unix socket path
	proxy    string // TCP address to listen on
	verbose  bool
}

func main() {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostpathplugin:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "hostpathplugin:", err)
		os.Exit(1)
	}
}

// parse accepts upstream's flag syntax (-flag=value or --flag=value, or
// the value as the next word). Flags other than --endpoint,
// --proxy-endpoint and --v are other modes' and refused.
func parse(args []string) (options, error) {
	var o options
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return o, fmt.Errorf("unexpected argument %q: only the proxy mode (--endpoint, --proxy-endpoint) is supported", a)
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "v" {
			o.verbose = !hasValue || value != "0"
			continue
		}
		if name != "endpoint" && name != "proxy-endpoint" {
			return o, fmt.Errorf("flag --%s: not supported, this hostpathplugin only has the proxy mode (--endpoint, --proxy-endpoint)", name)
		}
		if !hasValue {
			if i+1 >= len(args) {
				return o, fmt.Errorf("flag --%s needs a value", name)
			}
			i++
			value = args[i]
		}
		if name == "endpoint" {
			o.endpoint = value
		} else {
			o.proxy = value
		}
	}
	if o.proxy == "" {
		return o, errors.New("--proxy-endpoint is required: this hostpathplugin only has the proxy mode")
	}
	addr, ok := strings.CutPrefix(o.proxy, "tcp://")
	if !ok || addr == "" {
		return o, fmt.Errorf("--proxy-endpoint %q: want tcp://[host]:port", o.proxy)
	}
	o.proxy = addr
	path, isUnix := strings.CutPrefix(o.endpoint, "unix://")
	if isUnix {
		o.endpoint = path
	}
	if o.endpoint == "" || strings.Contains(o.endpoint, "://") {
		return o, fmt.Errorf("--endpoint %q: want a unix socket path (or unix://path)", o.endpoint)
	}
	return o, nil
}
