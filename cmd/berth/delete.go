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
berth apply.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch args[0] {
			case "pod", "pods", "po":
			default:
				return fmt.Errorf("berth deletes pods only: want \"delete pod NAME\", got %q", args[0])
			}
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
	cmd.Flags().StringVarP(&namespace, "namespace", "n", metav1.NamespaceDefault, "the pods' namespace")
	return cmd
}

func deletePod(ctx context.Context, client *adminapi.Client, namespace, name string) (*metav1.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	return client.Delete(ctx, namespace, name)
}
