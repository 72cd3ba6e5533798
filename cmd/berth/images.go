package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

func newImagesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Manage the images in berth's managed containerd",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newImagesImportCommand())
	return cmd
}

func newImagesImportCommand() *cobra.Command {
	var (
		rootDir     string
		address     string
		snapshotter string
		timeout     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "import FILE...",
		Short: "Import image tarballs (docker-archive or OCI layout, plain, gzip or zstd)",
		Long: `Import image tarballs into the containerd berth runs pods on, so pods can
use the images without a registry. Prints the names of the images imported.
Every file is tried; the command fails if any import failed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if address == "" {
				address = filepath.Join(rootDir, "containerd", "containerd.sock")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var errs []error
			for _, file := range files {
				names, err := containerd.ImportFile(ctx, address, snapshotter, file)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				for _, name := range names {
					fmt.Fprintln(cmd.OutOrStdout(), name)
				}
			}
			return errors.Join(errs...)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&rootDir, "root-dir", config.DefaultRootDir, "berth's root directory, where its managed containerd's socket is")
	fs.StringVar(&address, "containerd-address", "", "containerd socket (default: <root-dir>/containerd/containerd.sock)")
	fs.StringVar(&snapshotter, "snapshotter", "overlayfs", "snapshotter to unpack the images for")
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
	return cmd
}
