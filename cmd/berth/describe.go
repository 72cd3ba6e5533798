package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
)

func newDescribeCommand() *cobra.Command {
	var server, namespace, output string
	cmd := &cobra.Command{
		Use:   "describe [pod] NAME | pods | node",
		Short: "Show a pod or the node in detail with its events, like kubectl describe",
		Long: `Show a pod in detail, the way kubectl describe pod does: its status and
conditions, each container's state, last state, probes, resources, environment
and mounts, the pod's volumes and QoS class, whether berth admitted it (the
checks it failed, or the pods a critical pod preempted), and the events that
explain what berth did with it and why. A manifest berth could not read shows
the error. "berth describe pods" describes every pod of the namespace.

"berth describe node" shows the node: its pressure conditions, capacity and
allocatable, its pods and what they request, and the eviction thresholds with
what was last observed of them.

-o json and -o yaml print the object itself instead, as kubectl get -o yaml
does: the v1 Pod with its status (a v1 PodList for "pods"), or the v1 Node.
States and warnings are coloured on a terminal (see --color).`,
		Example: `  # The pod "web" in namespace default
  berth describe web

  # A pod of another namespace; "pod/NAME" and "pod NAME" work as in kubectl
  berth describe pod coredns -n kube-system

  # Every pod of the namespace, then the node
  berth describe pods
  berth describe node

  # The pod as the API object, to inspect or keep
  berth describe pod web -o yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 || len(args) > 2 {
				return usageErrorf("want a pod: berth describe [pod] NAME, got %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: completeDescribeArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, out, client := cmd.Context(), cmd.OutOrStdout(), newAPIClient(server)
			if len(args) == 1 && (args[0] == "node" || args[0] == "nodes" || args[0] == "no") {
				if output != "" {
					return printNode(ctx, out, client, output)
				}
				return describeNodeCmd(ctx, out, client, time.Now(), paletteFor(cmd))
			}
			name, err := describeTarget(args)
			if err != nil {
				return err
			}
			if output != "" {
				return printPodObjects(ctx, out, client, namespace, name, output)
			}
			return describe(ctx, out, cmd.ErrOrStderr(), client, namespace, name, time.Now(), paletteFor(cmd))
		},
	}
	addServerFlag(cmd.Flags(), &server)
	addNamespaceFlag(cmd, &namespace)
	addOutputFlag(cmd, &output, "a description", outputJSON, outputYAML)
	return cmd
}

// describeTarget reads kubectl's ways of naming pods: "NAME", "pod NAME",
// "pod/NAME", and "pods" alone for all of them (returned as "").
func describeTarget(args []string) (string, error) {
	if len(args) == 2 {
		if !isPodKind(args[0]) {
			return "", usageErrorf("only pods can be described: want \"pod NAME\", got %q", strings.Join(args, " "))
		}
		return args[1], nil
	}
	arg := args[0]
	if isPodKind(arg) {
		return "", nil
	}
	if kind, name, ok := strings.Cut(arg, "/"); ok {
		if !isPodKind(kind) || name == "" {
			return "", usageErrorf("only pods can be described: want pod/NAME, got %q", arg)
		}
		return name, nil
	}
	return arg, nil
}

// isPodKind tells whether s names the pod kind, as kubectl spells it.
func isPodKind(s string) bool { return s == "pod" || s == "pods" || s == "po" }

// describe writes the description of one pod, or of every pod in the
// namespace when name is empty.
func describe(ctx context.Context, out, errOut io.Writer, client *apiClient, namespace, name string, now time.Time, pal palette) error {
	list, err := client.pods(ctx)
	if err != nil {
		return err
	}
	if name != "" {
		pod := findPod(list.Items, namespace, name)
		events, err := client.events(ctx, namespace, name)
		if err != nil {
			return err
		}
		if pod == nil {
			// Gone, but berth still remembers what happened to it.
			_, err = io.WriteString(out, pal.description(describeGonePod(namespace, name, events.Items, now)))
			return err
		}
		_, err = io.WriteString(out, pal.description(describePod(pod, fetchAdmission(ctx, client, pod), events.Items, now)))
		return err
	}

	pods := podsOf(list.Items, namespace)
	if len(pods) == 0 {
		fmt.Fprintf(errOut, "No resources found in %s namespace.\n", namespace)
		return nil
	}
	for i, pod := range pods {
		events, err := client.events(ctx, pod.Namespace, pod.Name)
		if err != nil {
			return err
		}
		if i > 0 {
			io.WriteString(out, "\n\n")
		}
		if _, err := io.WriteString(out, pal.description(describePod(pod, fetchAdmission(ctx, client, pod), events.Items, now))); err != nil {
			return err
		}
	}
	return nil
}

// fetchAdmission asks for berth's admission decision about pod. A pod berth
// keeps no record of shows none, and a failure to fetch it shows in its
// place: neither keeps the rest of the pod from being described.
func fetchAdmission(ctx context.Context, client *apiClient, pod *v1.Pod) admissionRecord {
	r, err := client.admission(ctx, pod.Namespace, pod.Name)
	if errors.Is(err, errNoAdmission) {
		return admissionRecord{}
	}
	return admissionRecord{result: r, err: err}
}

// podsOf are the pods of namespace, by name.
func podsOf(all []v1.Pod, namespace string) []*v1.Pod {
	var pods []*v1.Pod
	for i := range all {
		if all[i].Namespace == namespace {
			pods = append(pods, &all[i])
		}
	}
	slices.SortFunc(pods, func(a, b *v1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// printPodObjects writes one pod, or the pods of the namespace when name is
// empty, as JSON or YAML objects.
func printPodObjects(ctx context.Context, out io.Writer, client *apiClient, namespace, name, output string) error {
	list, err := client.pods(ctx)
	if err != nil {
		return err
	}
	if name == "" {
		return writeStructured(out, output, typedPodList(podsOf(list.Items, namespace)))
	}
	pod := findPod(list.Items, namespace, name)
	if pod == nil {
		return notFoundErrorf("pod %s/%s not found", namespace, name)
	}
	return writeStructured(out, output, typedPod(pod))
}

// printNode writes the node as a JSON or YAML object.
func printNode(ctx context.Context, out io.Writer, client *apiClient, output string) error {
	var node v1.Node
	if err := client.getJSON(ctx, "/node", "the node", &node); err != nil {
		return err
	}
	node.APIVersion, node.Kind = "v1", "Node"
	return writeStructured(out, output, &node)
}
