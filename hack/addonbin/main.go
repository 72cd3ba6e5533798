// Command addonbin prints the path of one of test/cluster's cached addon
// binaries, building it first if it is not cached ($BERTH_ADDONS_BIN, else
// bin/cluster): `make bench BENCH_COMPARE=kubelet` gets the kubelet so,
// keeping the test cluster's build out of berth-bench itself.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-dev/berth/test/cluster"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: addonbin NAME (e.g. kubelet)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A first build of the kubelet takes about 15 minutes on 2 cores.
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	path, err := cluster.BuildAddon(ctx, os.Args[1], os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "addonbin:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}
