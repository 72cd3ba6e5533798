package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Shell completion: cobra's completion command writes the scripts (bash,
// zsh, fish, powershell); the functions here suggest the names only a
// running berth knows. They ask its local API, at the --server and for the
// -n given on the command line so far, and stay quiet when it does not
// answer: no suggestions, never an error in the middle of a command line.

// completionTimeout bounds the local API call behind one Tab press.
const completionTimeout = 2 * time.Second

// completePodNames completes a command's one POD argument with the names
// of the pods of its namespace. It suits any command whose first argument
// is a pod and that has --server and -n: logs, exec, attach.
func completePodNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return podNameCompletions(completionPods(cmd), namespaceOf(cmd), toComplete, nil), cobra.ShellCompDirectiveNoFileComp
}

// completeContainerNames completes -c with the containers of the pod
// named by the first argument.
func completeContainerNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	pod := findPod(completionPods(cmd), namespaceOf(cmd), args[0])
	return containerNameCompletions(pod, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeDescribeArgs completes describe's arguments: a kind or a pod
// name first, a pod name after "pod".
func completeDescribeArgs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch {
	case len(args) == 0:
		kinds := withPrefix([]string{"pod", "pods", "node"}, toComplete)
		names := podNameCompletions(completionPods(cmd), namespaceOf(cmd), toComplete, nil)
		return append(kinds, names...), cobra.ShellCompDirectiveNoFileComp
	case len(args) == 1 && isPodKind(args[0]):
		return podNameCompletions(completionPods(cmd), namespaceOf(cmd), toComplete, nil), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeDeleteArgs completes "delete pod NAME...": the kind, then the
// pods not named yet.
func completeDeleteArgs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return withPrefix([]string{"pod"}, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	return podNameCompletions(completionPods(cmd), namespaceOf(cmd), toComplete, args[1:]), cobra.ShellCompDirectiveNoFileComp
}

// completeNamespaces completes -n with the namespaces that have pods.
func completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var namespaces []string
	for _, p := range completionPods(cmd) {
		namespaces = append(namespaces, p.Namespace)
	}
	slices.Sort(namespaces)
	return withPrefix(slices.Compact(namespaces), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// addNamespaceFlag registers -n, completed with the namespaces berth has
// pods in.
func addNamespaceFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVarP(dst, "namespace", "n", metav1.NamespaceDefault, "namespace of the pod")
	// Registering completion for a flag just added cannot fail.
	_ = cmd.RegisterFlagCompletionFunc("namespace", completeNamespaces)
}

// completionPods asks the local API for the pods; nil when it does not
// answer in time.
func completionPods(cmd *cobra.Command) []v1.Pod {
	server := defaultServerAddress()
	if f := cmd.Flag("server"); f != nil {
		server = f.Value.String()
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	list, err := newAPIClient(server).pods(ctx)
	if err != nil {
		return nil
	}
	return list.Items
}

// namespaceOf is the -n of the command line being completed.
func namespaceOf(cmd *cobra.Command) string {
	if f := cmd.Flag("namespace"); f != nil && f.Value.String() != "" {
		return f.Value.String()
	}
	return metav1.NamespaceDefault
}

// podNameCompletions are the names of the pods of namespace that start
// with prefix, sorted, leaving out those already on the command line.
func podNameCompletions(pods []v1.Pod, namespace, prefix string, given []string) []string {
	var names []string
	for _, p := range pods {
		if p.Namespace == namespace && strings.HasPrefix(p.Name, prefix) && !slices.Contains(given, p.Name) {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// containerNameCompletions are the pod's containers that start with
// prefix, in the pod's order: init containers first, as they run.
func containerNameCompletions(pod *v1.Pod, prefix string) []string {
	if pod == nil {
		return nil
	}
	var names []string
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	return withPrefix(names, prefix)
}

// withPrefix keeps the choices that start with prefix.
func withPrefix(choices []string, prefix string) []string {
	var out []string
	for _, c := range choices {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}
