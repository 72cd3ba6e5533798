// Command conformance runs the upstream Kubernetes e2e suite's node
// conformance specs against berth: it builds the control plane of
// test/cluster and the suite (cached under bin/), builds the test images
// without a registry, joins berth nodes to the control plane, runs the
// selection and writes the JUnit reports and a summary under
// bin/conformance/latest. `make conformance` runs it; see CONFORMANCE.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/berth-dev/berth/test/cluster"
	"github.com/berth-dev/berth/test/conformance"
)

func main() {
	repo, err := conformance.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(2)
	}
	c := conformance.Config{Log: os.Stdout}
	buildOnly := flag.Bool("build-only", false, "build the control plane and the suite, then exit")
	list := flag.Bool("list", false, "list the specs each pass selects (a dry run, no cluster), then exit")
	flag.StringVar(&c.BerthBin, "berth-bin", envOr("BERTH_BIN", filepath.Join(repo, "bin")), "directory of berth and berth-pause")
	flag.StringVar(&c.Busybox, "busybox", "/bin/busybox", "static busybox the images are made of")
	flag.StringVar(&c.OutDir, "out", filepath.Join(repo, "bin", "conformance"), "where runs/<time> and latest go")
	flag.StringVar(&c.Selection.Focus, "focus", "", "regexp of the specs to run instead of the default selection")
	flag.StringVar(&c.Selection.Skip, "skip", "", "regexp of specs to leave out")
	flag.StringVar(&c.Selection.LabelFilter, "label-filter", "", "ginkgo label filter replacing the default exclusions (Disruptive, Flaky, Slow, Feature:*, Alpha, BetaOffByDefault)")
	flag.DurationVar(&c.Timeout, "timeout", 3*time.Hour, "ginkgo timeout of each pass")
	flag.IntVar(&c.Nodes, "nodes", 2, "berth nodes to join")
	flag.IntVar(&c.Procs, "procs", 4, "specs run at once (ginkgo -p) outside the Serial pass")
	flag.StringVar(&c.Containerd, "containerd", "", "directory of the containerd (with its shim and runc) the nodes manage; default: the host's, from PATH")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	// The first Ctrl-C interrupts the suite and cleans up; a second one
	// kills us as usual.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	if *buildOnly {
		if _, err := cluster.Build(ctx, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			os.Exit(1)
		}
		if _, err := conformance.BuildPrograms(ctx, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			os.Exit(1)
		}
		return
	}
	if *list {
		if err := listSpecs(ctx, c); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			os.Exit(1)
		}
		return
	}
	s, err := conformance.Run(ctx, c)
	fmt.Println()
	s.WriteText(os.Stdout, false)
	fmt.Printf("reports: %s\n", filepath.Join(c.OutDir, "latest"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
	if !s.OK() {
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// listSpecs prints each pass's specs, as e2e.test's dry run selects them.
func listSpecs(ctx context.Context, c conformance.Config) error {
	progs, err := conformance.BuildPrograms(ctx, os.Stderr)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "berth-conformance-list-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rc := conformance.RunConfig{E2ETest: progs.E2ETest, OutDir: dir, Timeout: time.Hour, DryRun: true}
	for _, p := range c.Selection.Passes() {
		res, err := conformance.RunPass(ctx, rc, p)
		if err != nil {
			return err
		}
		fmt.Printf("# pass %s: %d specs (label filter %q)\n", p.Name, len(res.Specs), p.LabelFilter)
		for _, s := range res.Specs {
			fmt.Println(s.Name)
		}
	}
	return nil
}
