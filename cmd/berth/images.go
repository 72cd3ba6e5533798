package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/images"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

func newImagesCommand() *cobra.Command {
	var server, output string
	cmd := &cobra.Command{
		Use:   "images",
		Short: "List the runtime's images and what image GC would do with each; import images",
		Long: `List every image of the runtime berth runs pods on: its tags, ID and size, when
berth first saw it and last saw it in use, whether it is in use or pinned, and
why image garbage collection would or would not remove it now.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []images.ImageStatus
			if err := newAPIClient(server).getJSON(cmd.Context(), "/images", "the images", &list); err != nil {
				return err
			}
			if output != "" {
				return writeRaw(cmd.OutOrStdout(), output, list)
			}
			_, err := io.WriteString(cmd.OutOrStdout(), imageTable(list, time.Now()))
			return err
		},
	}
	addServerFlag(cmd.Flags(), &server)
	cmd.Flags().StringVarP(&output, "output", "o", "", "json for the raw answer of the local API")
	cmd.AddCommand(newImagesImportCommand())
	return cmd
}

// imageTable renders images one a row.
func imageTable(list []images.ImageStatus, now time.Time) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tID\tSIZE\tFIRST SEEN\tLAST USED\tGC")
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return since(t, now) + " ago"
	}
	for _, img := range list {
		name := "<none>"
		if len(img.RepoTags) > 0 {
			name = strings.Join(img.RepoTags, ",")
		}
		firstSeen := ago(img.FirstDetected)
		if img.FirstDetected.IsZero() {
			firstSeen = "before start"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, images.ShortID(img.ID), images.HumanBytes(img.Size),
			firstSeen, ago(img.LastUsed), img.Verdict)
	}
	tw.Flush()
	return b.String()
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
