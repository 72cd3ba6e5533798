package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/images"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

func newImagesCommand() *cobra.Command {
	var server, output string
	cmd := &cobra.Command{
		Use:   "images",
		Short: "List the runtime's images and what image GC would do with each; import and pull images",
		Long: `List every image of the runtime berth runs pods on: its tags, ID and size, when
berth first saw it and last saw it in use, whether it is in use or pinned, and
why image garbage collection would or would not remove it now. -o json and
-o yaml print the local API's answer instead.`,
		Example: `  # The images and what image GC would do with each
  berth images

  # Images that image GC would remove now
  berth images -o json | jq -r '.[] | select(.verdict | startswith("collectable")) | .repoTags[]'

  # Import an image saved with docker save, without a registry
  berth images import busybox.tar`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []images.ImageStatus
			if err := newAPIClient(server).getJSON(cmd.Context(), "/images", "the images", &list); err != nil {
				return err
			}
			if output != "" {
				return writeStructured(cmd.OutOrStdout(), output, list)
			}
			_, err := io.WriteString(cmd.OutOrStdout(), imageTable(list, time.Now()))
			return err
		},
	}
	addServerFlag(cmd.Flags(), &server)
	addOutputFlag(cmd, &output, "a table", outputJSON, outputYAML)
	cmd.AddCommand(newImagesImportCommand(), newImagesPullCommand())
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
		flags       containerdFlags
		snapshotter string
		timeout     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "import FILE...",
		Short: "Import image tarballs (docker-archive or OCI layout, plain, gzip or zstd)",
		Long: `Import image tarballs into the containerd berth runs pods on, so pods can
use the images without a registry. Prints the names of the images imported.
Every file is tried; the command fails if any import failed.

On a terminal, a line on standard error shows each file's progress: the bytes
read and the rate, then the image being unpacked. Nothing is shown when
standard error is not a terminal.`,
		Example: `  # Images saved with docker save or podman save, or an OCI layout tarball
  berth images import busybox.tar
  berth images import app-v2.tar.gz pause.oci.tar

  # Into a containerd of your own rather than berth's managed one
  berth images import busybox.tar --containerd-address /run/containerd/containerd.sock`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := flags.reach(ctx); err != nil {
				return err
			}
			var errs []error
			for _, file := range files {
				names, err := importFile(ctx, cmd.ErrOrStderr(), flags.socket(), snapshotter, file)
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
	flags.add(cmd.Flags())
	cmd.Flags().StringVar(&snapshotter, "snapshotter", "overlayfs", "snapshotter to unpack the images for")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
	return cmd
}

// containerdFlags name the containerd that image commands work on:
// berth's managed one under --root-dir, or any other by its socket.
type containerdFlags struct {
	rootDir string
	address string
}

func (f *containerdFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.rootDir, "root-dir", defaultRootDir(), "berth's root directory, where its managed containerd's socket is; $"+rootDirEnv+" sets the default")
	fs.StringVar(&f.address, "containerd-address", "", "containerd socket (default: <root-dir>/containerd/containerd.sock)")
}

// reach checks that the containerd answers, so that a wrong socket fails
// at once and as unreachable.
func (f *containerdFlags) reach(ctx context.Context) error {
	if err := containerd.Probe(ctx, f.socket()); err != nil {
		return withExitCode(exitUnreachable, fmt.Errorf("%w (is `berth run` running? see --root-dir or --containerd-address)", err))
	}
	return nil
}

// socket is the containerd socket to use.
func (f *containerdFlags) socket() string {
	if f.address != "" {
		return f.address
	}
	return filepath.Join(f.rootDir, "containerd", "containerd.sock")
}

// importFile imports one tarball, showing its progress on progressOut when
// that is a terminal.
func importFile(ctx context.Context, progressOut io.Writer, address, snapshotter, file string) ([]string, error) {
	if !isTerminal(progressOut) {
		return containerd.ImportFile(ctx, address, snapshotter, file)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer f.Close()
	p := &transferProgress{label: filepath.Base(file), width: terminalWidth(progressOut)}
	p.read.r = f
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		p.total = st.Size()
	}
	stop := startProgress(ctx, progressOut, clock.RealClock{}, p.line)
	names, err := containerd.ImportArchive(ctx, address, snapshotter, &p.read,
		containerd.WithUnpacking(func(image string) { p.setPhase("unpacking " + image) }))
	if err != nil {
		p.setPhase("failed")
	} else {
		p.setPhase("imported")
	}
	stop()
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", file, err)
	}
	return names, nil
}
