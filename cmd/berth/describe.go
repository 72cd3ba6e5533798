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
	var server, namespace string
	cmd := &cobra.Command{
		Use:   "describe [pod] NAME | node",
		Short: "Show a pod or the node in detail with its events, like kubectl describe",
		Long: `Show a pod in detail, the way kubectl describe pod does: its status and
conditions, each container's state, last state, probes, resources, environment
and mounts, the pod's volumes and QoS class, whether berth admitted it (the
checks it failed, or the pods a critical pod preempted), and the events that
explain what berth did with it and why. A manifest berth could not read shows
the error.

  berth describe web                 the pod "web" in namespace default
  berth describe pod web -n kube-system
  berth describe pods                every pod in the namespace
  berth describe node                the node: pressure conditions, capacity,
                                     allocatable, its pods and what they
                                     request, eviction thresholds`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 || len(args) > 2 {
				return fmt.Errorf("want a pod: berth describe [pod] NAME, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && (args[0] == "node" || args[0] == "nodes" || args[0] == "no") {
				return describeNodeCmd(cmd.Context(), cmd.OutOrStdout(), newAPIClient(server), time.Now())
			}
			name, err := describeTarget(args)
			if err != nil {
				return err
			}
			return describe(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), newAPIClient(server), namespace, name, time.Now())
		},
	}
	addServerFlag(cmd.Flags(), &server)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the pod")
	return cmd
}

// describeTarget reads kubectl's ways of naming pods: "NAME", "pod NAME",
// "pod/NAME", and "pods" alone for all of them (returned as "").
func describeTarget(args []string) (string, error) {
	isPodType := func(s string) bool { return s == "pod" || s == "pods" || s == "po" }
	if len(args) == 2 {
		if !isPodType(args[0]) {
			return "", fmt.Errorf("only pods can be described: want \"pod NAME\", got %q", strings.Join(args, " "))
		}
		return args[1], nil
	}
	arg := args[0]
	if isPodType(arg) {
		return "", nil
	}
	if kind, name, ok := strings.Cut(arg, "/"); ok {
		if !isPodType(kind) || name == "" {
			return "", fmt.Errorf("only pods can be described: want pod/NAME, got %q", arg)
		}
		return name, nil
	}
	return arg, nil
}

// describe writes the description of one pod, or of every pod in the
// namespace when name is empty.
func describe(ctx context.Context, out, errOut io.Writer, client *apiClient, namespace, name string, now time.Time) error {
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
			_, err = io.WriteString(out, describeGonePod(namespace, name, events.Items, now))
			return err
		}
		_, err = io.WriteString(out, describePod(pod, fetchAdmission(ctx, client, pod), events.Items, now))
		return err
	}

	var pods []*v1.Pod
	for i := range list.Items {
		if list.Items[i].Namespace == namespace {
			pods = append(pods, &list.Items[i])
		}
	}
	if len(pods) == 0 {
		fmt.Fprintf(errOut, "No resources found in %s namespace.\n", namespace)
		return nil
	}
	slices.SortFunc(pods, func(a, b *v1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for i, pod := range pods {
		events, err := client.events(ctx, pod.Namespace, pod.Name)
		if err != nil {
			return err
		}
		if i > 0 {
			io.WriteString(out, "\n\n")
		}
		if _, err := io.WriteString(out, describePod(pod, fetchAdmission(ctx, client, pod), events.Items, now)); err != nil {
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
