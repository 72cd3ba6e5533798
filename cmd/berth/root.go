package main

import (
	"github.com/spf13/cobra"
)

func newRootCommand(version string) *cobra.Command {
	root := &cobra.Command{
		Use:   "berth",
		Short: "A Kubernetes node agent for one machine",
		Long: `berth does the kubelet's job on one machine. It runs the pods described by
static pod manifests (Kubernetes v1 Pod YAML in a directory, as with
kubelet --pod-manifest-path) on a real container runtime over the CRI: by
default a containerd that berth starts and manages itself, or any CRI runtime
you point it at. It keeps the pods' containers running, restarts them by their
restart policy, and serves their status, events and logs on a local read-only
API that "berth pods", "berth describe" and "berth logs" read. It takes the
kubelet's own KubeletConfiguration file and flag names, so an existing kubelet
setup carries over.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	addColorFlag(root)
	root.AddCommand(
		newRunCommand(),
		newPodsCommand(),
		newDescribeCommand(),
		newLogsCommand(),
		newImagesCommand(),
		newDevicesCommand(),
		newApplyCommand(),
		newDeleteCommand(),
		newExecCommand(),
		newAttachCommand(),
		newResetCommand(),
		newVersionCommand(version),
	)
	applyExitCodes(root)
	return root
}
