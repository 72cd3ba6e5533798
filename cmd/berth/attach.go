package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/adminapi"
)

func newAttachCommand() *cobra.Command {
	var f streamFlags
	cmd := &cobra.Command{
		Use:   "attach POD [-c CONTAINER] [-i] [-t]",
		Short: "Attach to a running container's main process, like kubectl attach",
		Long: `Attach to the main process of a running container: print what it writes and,
with -i, send it standard input. The container must have been started with
stdin: true to read input, and with tty: true to run in a terminal; -t is
dropped with a warning otherwise, and a container with a terminal always
gets one. Interrupting berth attach (Ctrl-C, outside a terminal session)
detaches and leaves the process running.

Without -c, the pod's only container is used (or the one its
kubectl.kubernetes.io/default-container annotation names). The pod is read
from the local API (--server); the stream goes through
<root-dir>/` + adminapi.SocketName + `, so it needs root.`,
		Example: `  # Print what the container writes from now on
  berth attach web-node1

  # Talk to a process that reads standard input (stdin: true)
  berth attach -i web-node1 -c repl

  # An interactive program in a terminal (stdin: true, tty: true)
  berth attach -it console-node1`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one pod name: berth attach POD [-c CONTAINER], got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStream(cmd, f, streamRequest{kind: "attach", pod: args[0]})
		},
	}
	f.register(cmd, "container to attach to")
	return cmd
}
