package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func newPodsCommand() *cobra.Command {
	var server, output string
	cmd := &cobra.Command{
		Use:   "pods",
		Short: "List berth's pods, like kubectl get pods -A",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			list, err := newAPIClient(server).pods(cmd.Context())
			if err != nil {
				return err
			}
			if len(list.Items) == 0 && (output == "" || output == "wide") {
				fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
				return nil
			}
			return printPods(cmd.OutOrStdout(), list, output, time.Now())
		},
	}
	addServerFlag(cmd.Flags(), &server)
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml (default: a table)")
	return cmd
}

func checkOutput(output string) error {
	switch output {
	case "", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output %q: want wide, json or yaml", output)
}

// printPods writes the pods in the chosen format; tables are sorted by
// namespace and name, as kubectl prints them.
func printPods(w io.Writer, list *v1.PodList, output string, now time.Time) error {
	switch output {
	case "json":
		data, err := json.MarshalIndent(list, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case "yaml":
		data, err := yaml.Marshal(list)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}

	rows := make([]podRow, 0, len(list.Items))
	for i := range list.Items {
		rows = append(rows, podRowFor(&list.Items[i], now))
	}
	slices.SortFunc(rows, func(a, b podRow) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})

	wide := output == "wide"
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "NAMESPACE\tNAME\tREADY\tSTATUS\tRESTARTS\tAGE\tIP"
	if wide {
		header += "\tNODE"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		line := strings.Join([]string{r.Namespace, r.Name, r.Ready, r.Status, r.Restarts, r.Age, r.IP}, "\t")
		if wide {
			line += "\t" + r.Node
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
