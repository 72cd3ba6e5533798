package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/berth-dev/berth/internal/agent"
	"github.com/berth-dev/berth/internal/config"
)

func newRunCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the node agent: start the pods in the manifest directory and keep them running",
		Long: `Run the node agent until SIGINT or SIGTERM. Pods keep running after berth
stops and are adopted again when it restarts.

Configuration comes from --config, a KubeletConfiguration file
(kubelet.config.k8s.io/v1beta1), and from flags, which override it. Fields of
the file that berth does not implement yet are listed as warnings at start-up.
The read-only API listens on 127.0.0.1 (it has no TLS and no authentication,
so it never listens beyond loopback). --port turns on the secure API: TLS,
authenticated callers only (--client-ca-file, --token-auth-file), exec and
attach. Logs are text on a terminal and JSON otherwise (--logging-format).`,
		Example: `  # The pods in /etc/berth/manifests, on berth's own containerd
  berth run --pod-manifest-path /etc/berth/manifests

  # An existing kubelet configuration, with debug logs
  berth run --config /var/lib/kubelet/config.yaml --v 4

  # The secure API on every address, for holders of a token
  berth run --address 0.0.0.0 --read-only-port 0 --port 10250 --token-auth-file /etc/berth/tokens.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := cmd.Flags().GetString(config.FlagConfig)
			if err != nil {
				return err
			}
			cfg, err := config.Load(path, cmd.Flags())
			if err != nil {
				return err
			}
			log, err := newLogger(cmd.ErrOrStderr(), cfg.LogLevel, cfg.LogFormat)
			if err != nil {
				return err
			}
			for _, field := range cfg.Unimplemented {
				log.Warn("configuration field not implemented by berth yet; it has no effect", "field", field)
			}
			ctx := cmd.Context()
			cfg.BuildVersion = version
			if err := agent.Run(ctx, cfg, log); err != nil && !(errors.Is(err, context.Canceled) && ctx.Err() != nil) {
				return err
			}
			return nil
		},
	}
	config.AddFlags(cmd.Flags())
	return cmd
}

// newLogger logs to w at level (debug, info, warn or error) in format:
// text or json, or with "" text when w is a terminal, where a person reads
// it, and JSON otherwise, where a log collector does.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: l}
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "text"
		}
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q is not text or json", format)
}
