package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/adminapi"
)

// defaultContainerAnnotation names the container kubectl picks when none is
// given; berth honours it the same way.
const defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

func newLogsCommand() *cobra.Command {
	var (
		server    string
		rootDir   string
		namespace string
		container string
		q         logQuery
		since     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print a container's log, like kubectl logs",
		Long: `Print the log of a container in a pod. Without -c, the pod's only container
is used (or the one its kubectl.kubernetes.io/default-container annotation
names). With -f, berth logs keeps printing: when the container exits and is
restarted, it goes on with the new instance's log from its start, and it
returns once no restart will come (the pod has ended, is gone, or its
restart policy says so). --previous prints the instance before the current
one. The log comes through <root-dir>/` + adminapi.SocketName + `, so it needs root:
the read-only port serves no logs, as the kubelet's does not.`,
		Example: `  # The log of a static pod's only container (static pods' names end in the node name)
  berth logs web-node1

  # Follow one container, across its restarts
  berth logs -f web-node1 -c app

  # Why did it crash? The instance before the current one
  berth logs --previous web-node1 -c app

  # The last 20 lines with their times
  berth logs --tail 20 --timestamps -n kube-system dns-node1

  # The last hour's log, at most 64 KiB of it
  berth logs --since 1h --limit-bytes 65536 web-node1`,
		ValidArgsFunction: completePodNames,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one pod name: berth logs POD [-c CONTAINER], got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			q, err := logQueryFrom(q, since, cmd.Flags().Changed("since"), cmd.Flags().Changed("limit-bytes"))
			if err != nil {
				return err
			}
			client := logClients{api: newAPIClient(server), logs: newSocketClient(adminapi.SocketPath(rootDir))}
			podName := args[0]
			// Following across restarts starts from the instance the pod's
			// status names.
			follow := q.follow && !q.previous
			var pod *v1.Pod
			if container == "" || follow {
				list, err := client.api.pods(ctx)
				if err != nil {
					return err
				}
				pod = findPod(list.Items, namespace, podName)
				if pod == nil && container == "" {
					return notFoundErrorf("pod %q not found in namespace %q", podName, namespace)
				}
			}
			if container == "" {
				if container, err = defaultContainer(pod); err != nil {
					return err
				}
			}
			if follow {
				f := &logFollower{api: client, clock: clock.RealClock{}, interval: followPollInterval}
				err = f.follow(ctx, cmd.OutOrStdout(), namespace, podName, container, q, pod)
			} else {
				err = client.containerLogs(ctx, cmd.OutOrStdout(), namespace, podName, container, q)
			}
			if ctx.Err() != nil {
				// Interrupted while following: that is how a follow ends.
				return nil
			}
			return err
		},
	}
	fs := cmd.Flags()
	addServerFlag(fs, &server)
	addRootDirFlag(fs, &rootDir)
	addNamespaceFlag(cmd, &namespace)
	fs.StringVarP(&container, "container", "c", "", "container to print the log of")
	// Registering completion for a flag just added cannot fail.
	_ = cmd.RegisterFlagCompletionFunc("container", completeContainerNames)
	fs.BoolVarP(&q.follow, "follow", "f", false,
		"keep printing the log as it grows, and each new instance's after a restart, until the container stops for good")
	fs.BoolVarP(&q.previous, "previous", "p", false, "print the log of the previous instance of the container")
	fs.BoolVar(&q.timestamps, "timestamps", false, "prefix each line with its time")
	fs.Int64Var(&q.tailLines, "tail", -1, "print only the last N lines (-1: all)")
	fs.DurationVar(&since, "since", 0, "print only lines newer than this, e.g. 5s, 2m or 3h (rounded up to seconds)")
	fs.StringVar(&q.sinceTime, "since-time", "", "print only lines written at or after this RFC 3339 time")
	fs.Int64Var(&q.limitBytes, "limit-bytes", 0, "print at most this many bytes of each instance's log")
	return cmd
}

// logClients read the pods from the local API and the logs from the admin
// socket.
type logClients struct{ api, logs *apiClient }

func (c logClients) pods(ctx context.Context) (*v1.PodList, error) { return c.api.pods(ctx) }

func (c logClients) containerLogs(ctx context.Context, w io.Writer, namespace, pod, container string, q logQuery) error {
	return c.logs.containerLogs(ctx, w, namespace, pod, container, q)
}

func findPod(pods []v1.Pod, namespace, name string) *v1.Pod {
	for i := range pods {
		if pods[i].Namespace == namespace && pods[i].Name == name {
			return &pods[i]
		}
	}
	return nil
}

// defaultContainer picks the container whose log to show when none was
// named: the one the default-container annotation names, else the only
// one; with several, the user must choose.
func defaultContainer(pod *v1.Pod) (string, error) {
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	if name := pod.Annotations[defaultContainerAnnotation]; name != "" && slices.Contains(names, name) {
		return name, nil
	}
	if len(names) == 1 {
		return names[0], nil
	}
	msg := fmt.Sprintf("pod %s/%s has %d containers; choose one with -c: %s",
		pod.Namespace, pod.Name, len(names), strings.Join(names, ", "))
	if len(pod.Spec.InitContainers) > 0 {
		var inits []string
		for _, c := range pod.Spec.InitContainers {
			inits = append(inits, c.Name)
		}
		msg += " (init containers: " + strings.Join(inits, ", ") + ")"
	}
	return "", fmt.Errorf("%s", msg)
}
