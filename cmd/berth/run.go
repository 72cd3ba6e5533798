package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

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
The local API listens on 127.0.0.1 by default, not on every address as the
kubelet's does, because it has no authentication.`,
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
			log, err := newLogger(cmd.ErrOrStderr(), cfg.LogLevel)
			if err != nil {
				return err
			}
			for _, field := range cfg.Unimplemented {
				log.Warn("configuration field not implemented by berth yet; it has no effect", "field", field)
			}
			ctx := cmd.Context()
			if err := agent.Run(ctx, cfg, log); err != nil && !(errors.Is(err, context.Canceled) && ctx.Err() != nil) {
				return err
			}
			return nil
		},
	}
	config.AddFlags(cmd.Flags())
	return cmd
}

// newLogger logs text to w at level (debug, info, warn or error).
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, err
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
