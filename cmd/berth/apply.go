package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/berth-dev/berth/internal/adminapi"
	"github.com/berth-dev/berth/internal/config"
)

const (
	rootDirEnv = "BERTH_ROOT_DIR"
	// adminTimeout bounds one call to the admin API: an apply waits for
	// the disk, and at start for the manifest directory's first read.
	adminTimeout = 30 * time.Second
)

// addRootDirFlag registers --root-dir, whose default comes from
// BERTH_ROOT_DIR, else is berth run's.
func addRootDirFlag(fs *pflag.FlagSet, dst *string) {
	fs.StringVar(dst, "root-dir", defaultRootDir(), "root dir of the berth to talk to, whose <root-dir>/"+adminapi.SocketName+
		" is its admin socket; $"+rootDirEnv+" sets the default")
}

// defaultRootDir is $BERTH_ROOT_DIR, else berth run's default.
func defaultRootDir() string {
	if dir := os.Getenv(rootDirEnv); dir != "" {
		return dir
	}
	return config.DefaultRootDir
}

// adminClient is the client of the berth with this root dir.
func adminClient(rootDir string) *adminapi.Client {
	return adminapi.NewClient(adminapi.SocketPath(rootDir))
}

// adminError adds what to check to an error reaching the admin socket. A
// socket that could not be connected to (none, nobody listening, no
// permission) means berth is not reachable.
func adminError(err error, rootDir string) error {
	if errors.As(err, new(apierrors.APIStatus)) {
		return err // berth answered
	}
	err = fmt.Errorf("%w (is `berth run` running with --root-dir %s? see --root-dir or $%s; only root may use the socket)",
		err, rootDir, rootDirEnv)
	if se := (*os.SyscallError)(nil); errors.As(err, &se) && se.Syscall == "connect" {
		return withExitCode(exitUnreachable, err)
	}
	return err
}

func newApplyCommand() *cobra.Command {
	var (
		files   []string
		rootDir string
		output  string
	)
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or replace pods from a file, like kubectl apply",
		Long: `Create or replace the pods of a file (v1 Pod YAML or JSON, several separated by
---) on the local berth. They are checked as manifests are, keep their name,
and run like any pod until "berth delete pod"; berth stores them and runs them
again after a restart. Re-applying the same pod changes nothing; applying a
changed pod replaces it. Each pod is applied or refused on its own. Needs root:
it talks to <root-dir>/` + adminapi.SocketName + `.

It prints one line per pod applied ("pod/web created", "configured" or
"unchanged"), and fails if any pod was refused, naming the file and line of
each. -o json or -o yaml prints berth's answer instead: every pod's result,
refusals included.`,
		Example: `  # The pods of a file
  berth apply -f web.yaml

  # Several files, or standard input
  berth apply -f web.yaml -f db.yaml
  sed 's/v1.2/v1.3/' web.yaml | berth apply -f -

  # berth's answer, for a script
  berth apply -f web.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client := adminClient(rootDir)
			var (
				all  adminapi.ApplyResponse
				errs []error
			)
			for _, file := range files {
				resp, err := applyFile(cmd.Context(), client, cmd.InOrStdin(), file, rootDir)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				all.Pods = append(all.Pods, resp.Pods...)
				if output == "" {
					printApplied(cmd.OutOrStdout(), resp)
				}
				errs = append(errs, refusals(file, resp)...)
			}
			if output != "" {
				if err := writeStructured(cmd.OutOrStdout(), output, all); err != nil {
					return err
				}
			}
			return errors.Join(errs...)
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVarP(&files, "filename", "f", nil, "file of pods to apply; - reads standard input (repeatable)")
	// Marking a flag just added cannot fail.
	_ = cmd.MarkFlagRequired("filename")
	addRootDirFlag(fs, &rootDir)
	addOutputFlag(cmd, &output, "a line per pod", outputJSON, outputYAML)
	return cmd
}

// applyFile sends one file to berth.
func applyFile(ctx context.Context, client *adminapi.Client, stdin io.Reader, file, rootDir string) (*adminapi.ApplyResponse, error) {
	var (
		data []byte
		err  error
	)
	if file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", fileLabel(file), err)
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	resp, err := client.Apply(ctx, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fileLabel(file), adminError(err, rootDir))
	}
	return resp, nil
}

// printApplied prints each applied pod in kubectl's words: "pod/web created".
func printApplied(w io.Writer, resp *adminapi.ApplyResponse) {
	for _, r := range resp.Pods {
		if r.Error == nil {
			fmt.Fprintf(w, "pod/%s %s\n", r.Name, r.Result)
		}
	}
}

// refusals are the refused pods of a file as errors that point into it,
// the way invalid manifests are reported: the file, and for a later
// document its line.
func refusals(file string, resp *adminapi.ApplyResponse) []error {
	var errs []error
	for i, r := range resp.Pods {
		if r.Error == nil {
			continue
		}
		where := fileLabel(file)
		if i > 0 && r.Line > 0 {
			where = fmt.Sprintf("%s:%d", where, r.Line)
		}
		errs = append(errs, fmt.Errorf("%s: %s", where, r.Error.Message))
	}
	return errs
}

func fileLabel(file string) string {
	if file == "-" {
		return "<stdin>"
	}
	return file
}
