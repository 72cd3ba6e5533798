package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/devicemanager"
)

func newDevicesCommand() *cobra.Command {
	var server, output string
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List the device plugins' resources, their devices and who holds them",
		Long: `List each resource the device plugins advertise, with its capacity (every
device the plugin lists), allocatable (the healthy ones) and whether its plugin
is connected, and how many devices pods hold; each device with its health and NUMA nodes; each allocation (pod,
container, device IDs); and the node events that explain what the device
manager did (plugins registered, gone, refused; a corrupt checkpoint). -o json
and -o yaml print the local API's answer instead, without the events.`,
		Example: `  # Resources, devices, allocations and the device manager's events
  berth devices

  # Which pods hold devices of a resource
  berth devices -o json | jq '.allocations[] | select(.resource == "example.com/gpu")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client := newAPIClient(server)
			var snap devicemanager.Snapshot
			if err := client.getJSON(cmd.Context(), "/devices", "the devices", &snap); err != nil {
				return err
			}
			if output != "" {
				return writeStructured(cmd.OutOrStdout(), output, snap)
			}
			var events v1.EventList
			if err := client.getJSON(cmd.Context(), "/node/events", "the node's events", &events); err != nil {
				return err
			}
			_, err := io.WriteString(cmd.OutOrStdout(), paletteFor(cmd).description(describeDevices(snap, deviceEvents(events.Items), time.Now())))
			return err
		},
	}
	addServerFlag(cmd.Flags(), &server)
	addOutputFlag(cmd, &output, "tables", outputJSON, outputYAML)
	return cmd
}

// deviceEvents keeps the node events the device manager recorded.
func deviceEvents(all []v1.Event) []v1.Event {
	var out []v1.Event
	for _, e := range all {
		if strings.HasPrefix(e.Reason, "Device") {
			out = append(out, e)
		}
	}
	return out
}

// describeDevices renders the device manager's state as three tables and
// its events.
func describeDevices(snap devicemanager.Snapshot, events []v1.Event, now time.Time) string {
	var b strings.Builder
	w := newDescribeWriter(&b)
	if len(snap.Resources) == 0 {
		w.write(0, "Resources:\t<none>\n")
	} else {
		allocated := map[string]map[string]bool{}
		for _, a := range snap.Allocations {
			if allocated[a.Resource] == nil {
				allocated[a.Resource] = map[string]bool{}
			}
			for _, id := range a.DeviceIDs {
				allocated[a.Resource][id] = true
			}
		}
		w.write(0, "RESOURCE\tCAPACITY\tALLOCATABLE\tALLOCATED\tPLUGIN\n")
		for _, r := range snap.Resources {
			w.write(0, "%s\t%d\t%d\t%d\t%s\n", r.Name, r.Capacity, r.Allocatable, len(allocated[r.Name]), pluginState(r, now))
		}
		w.flush()
		w.write(0, "\nRESOURCE\tDEVICE\tHEALTH\tNUMA\n")
		for _, r := range snap.Resources {
			for _, d := range r.Devices {
				w.write(0, "%s\t%s\t%s\t%s\n", r.Name, d.ID, d.Health, numaList(d.NUMA))
			}
		}
	}
	w.flush()
	if len(snap.Allocations) == 0 {
		w.write(0, "\nAllocations:\t<none>\n")
	} else {
		w.write(0, "\nPOD\tCONTAINER\tRESOURCE\tDEVICES\n")
		for _, a := range snap.Allocations {
			pod := a.PodNamespace + "/" + a.PodName
			if a.PodName == "" {
				pod = "uid " + a.PodUID
			}
			w.write(0, "%s\t%s\t%s\t%s\n", pod, a.Container, a.Resource, strings.Join(a.DeviceIDs, ","))
		}
	}
	w.flush()
	w.write(0, "\n")
	writeEvents(w, events, now)
	w.flush()
	return b.String()
}

func pluginState(r devicemanager.ResourceStatus, now time.Time) string {
	switch {
	case r.Connected && r.Problem != "":
		return "connected, " + r.Problem
	case r.Connected && !r.Listed:
		// Registered, its first ListAndWatch answer not in: pods that
		// need it wait (devicemanager.NotReadyError).
		return "connected, devices not listed yet"
	case r.Connected:
		return "connected"
	case r.DisconnectedAt != nil:
		return fmt.Sprintf("not connected for %s", since(*r.DisconnectedAt, now))
	}
	return "not connected"
}

func numaList(nodes []int64) string {
	if len(nodes) == 0 {
		return "-"
	}
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

// getJSON fetches path and decodes its JSON answer into v; what names the
// answer in errors.
func (c *apiClient) getJSON(ctx context.Context, path, what string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("reading %s from %s: %w", what, c.base, err)
	}
	return nil
}
