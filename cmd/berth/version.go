package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// versionInfo is what `berth version` prints.
type versionInfo struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func newVersionCommand(version string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print berth's version and the Go version it was built with",
		Example: `  berth version
  berth version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versionInfo{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if output != "" {
				return writeStructured(cmd.OutOrStdout(), output, v)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "berth %s (%s, %s)\n", v.Version, v.GoVersion, v.Platform)
			return err
		},
	}
	addOutputFlag(cmd, &output, "one line", outputJSON, outputYAML)
	return cmd
}
