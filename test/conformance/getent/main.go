// Command getent is a stand-in for glibc's getent in the conformance run's
// agnhost and glibc-dns-testing images (busybox has none). It answers the
// one query the e2e suite's DNS specs make, `getent hosts NAME`, through
// Go's resolver: /etc/hosts, then the DNS servers and search list of
// /etc/resolv.conf, as glibc's "files dns" order does. It prints one line
// per address, the address then the name, and exits 2 when the name has
// none, as getent does for a key it cannot find.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], net.DefaultResolver, os.Stdout, os.Stderr))
}

// resolver is the part of *net.Resolver that getent uses.
type resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// run returns getent's exit code: 0 when every key was found, 2 when one
// was not, 1 on a usage error.
func run(args []string, r resolver, stdout, stderr io.Writer) int {
	if len(args) < 2 || args[0] != "hosts" {
		fmt.Fprintln(stderr, "usage: getent hosts NAME... (the only database this stand-in knows)")
		return 1
	}
	code := 0
	for _, name := range args[1:] {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		addrs, err := r.LookupHost(ctx, name)
		cancel()
		if err != nil || len(addrs) == 0 {
			code = 2
			continue
		}
		for _, a := range addrs {
			fmt.Fprintf(stdout, "%-15s %s\n", a, name)
		}
	}
	return code
}
