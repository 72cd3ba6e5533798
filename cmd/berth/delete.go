package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/adminapi"
)

func newDeleteCommand() *cobra.Command {
	var rootDir, namespace string
	cmd := &cobra.Command{
		Use:   "delete pod NAME...",
		Short: "Delete pods made with berth apply, like kubectl delete pod",
		Long: `Delete pods made with "berth apply": berth forgets them and stops them. Static
pods belong to their manifests: delete the manifest instead. Needs root, like
berth apply. Every name is tried; the command fails if any was not deleted.`,
		Example: `  # A pod of namespace default, then two of another namespace
  berth delete pod web
  berth delete pod worker-1 worker-2 -n batch`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && !isPodKind(args[0]) {
				return usageErrorf("berth deletes pods only: want \"delete pod NAME\", got %q", args[0])
			}
			return cobra.MinimumNArgs(2)(cmd, args)
		},
		ValidArgsFunction: completeDeleteArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			client := adminClient(rootDir)
			var errs []error
			for _, name := range args[1:] {
				st, err := deletePod(cmd.Context(), client, namespace, name)
				if err != nil {
					errs = append(errs, adminError(err, rootDir))
					continue
				}
				fmt.Fprintln(cmd.OutOrStdout(), st.Message)
			}
			return errors.Join(errs...)
		},
	}
	addRootDirFlag(cmd.Flags(), &rootDir)
	addNamespaceFlag(cmd, &namespace)
	return cmd
}

func deletePod(ctx context.Context, client *adminapi.Client, namespace, name string) (*metav1.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	return client.Delete(ctx, namespace, name)
}
