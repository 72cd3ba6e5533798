package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
)

func newPodsCommand() *cobra.Command {
	var server, output string
	cmd := &cobra.Command{
		Use:   "pods",
		Short: "List berth's pods, like kubectl get pods -A",
		Long: `List every pod berth runs, sorted by namespace and name, with kubectl's columns:
how many containers are ready, the status (the most telling reason among the
pod's and its containers'), restarts, age and IP. A manifest berth could not
read shows as InvalidManifest.

-o wide adds the node, the nominated node and the readiness gates; -o json and
-o yaml print a v1 PodList; -o name prints pod/NAME lines. The status is
coloured on a terminal (see --color).`,
		Example: `  # Every pod, as kubectl get pods -A lists them
  berth pods

  # With the node, nominated node and readiness gates
  berth pods -o wide

  # The pods as a v1 PodList, for jq or for keeping
  berth pods -o json | jq -r '.items[] | select(.status.phase != "Running") | .metadata.name'
  berth pods -o yaml > pods.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := newAPIClient(server).pods(cmd.Context())
			if err != nil {
				return err
			}
			if len(list.Items) == 0 && (output == "" || output == outputWide) {
				fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
				return nil
			}
			return printPods(cmd.OutOrStdout(), list, output, time.Now(), paletteFor(cmd))
		},
	}
	addServerFlag(cmd.Flags(), &server)
	addOutputFlag(cmd, &output, "a table", outputWide, outputJSON, outputYAML, outputName)
	return cmd
}

// printPods writes the pods in the chosen format, sorted by namespace and
// name as kubectl sorts them; pal colours the status column of tables.
func printPods(w io.Writer, list *v1.PodList, output string, now time.Time, pal palette) error {
	pods := make([]*v1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	slices.SortFunc(pods, func(a, b *v1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})

	switch output {
	case outputJSON, outputYAML:
		return writeStructured(w, output, typedPodList(pods))
	case outputName:
		for _, p := range pods {
			if _, err := fmt.Fprintf(w, "pod/%s\n", p.Name); err != nil {
				return err
			}
		}
		return nil
	}

	wide := output == outputWide
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := []string{"NAMESPACE", "NAME", "READY", pal.cell(toneNone, "STATUS"), "RESTARTS", "AGE", "IP"}
	if wide {
		header = append(header, "NODE", "NOMINATED NODE", "READINESS GATES")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, p := range pods {
		r := podRowFor(p, now)
		cells := []string{r.Namespace, r.Name, r.Ready, pal.cell(podTone(p.Status.Phase, r.Status), r.Status), r.Restarts, r.Age, r.IP}
		if wide {
			cells = append(cells, r.Node, orNone(p.Status.NominatedNodeName), readinessGates(p))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
