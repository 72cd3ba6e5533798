// Command berth is a Kubernetes node agent: it does the kubelet's job on one
// machine. See `berth --help`.
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

// version is set at build time: go build -ldflags "-X main.version=v0.1.0".
// It is a variable only because -X needs one; nothing else writes it.
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, a second one gets the default action and kills
	// berth at once, for when an orderly shutdown hangs.
	context.AfterFunc(ctx, stop)

	err := newRootCommand(version).ExecuteContext(ctx)
	stop()
	if exit := (exitCodeError{}); errors.As(err, &exit) {
		// The remote command's own status, which it has explained itself.
		os.Exit(exit.code)
	}
	if err != nil {
		// Errors joined from several causes are one per line; indenting the
		// continuation lines keeps them under the "berth:" that owns them.
		fmt.Fprintf(os.Stderr, "berth: %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
		os.Exit(exitCode(err))
	}
}
