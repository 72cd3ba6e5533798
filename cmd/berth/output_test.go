package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/images"
	"github.com/berth-dev/berth/internal/server"
)

func TestEnumValue(t *testing.T) {
	v := ""
	e := &enumValue{value: &v, allowed: []string{"json", "yaml"}}
	if err := e.Set("yaml"); err != nil || v != "yaml" || e.String() != "yaml" {
		t.Errorf("Set(yaml): %v, value %q", err, v)
	}
	if err := e.Set("xml"); err == nil || err.Error() != "want json or yaml" || v != "yaml" {
		t.Errorf("Set(xml): %v, value %q", err, v)
	}
}

func TestOrList(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"json"}, "json"},
		{[]string{"json", "yaml"}, "json or yaml"},
		{[]string{"wide", "json", "yaml", "name"}, "wide, json, yaml or name"},
	} {
		if got := orList(tt.in); got != tt.want {
			t.Errorf("orList(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWriteStructured(t *testing.T) {
	v := versionInfo{Version: "v1.2.3", GoVersion: "go1.26", Platform: "linux/amd64"}
	tests := []struct {
		format string
		want   string
	}{
		{outputJSON, "{\n    \"version\": \"v1.2.3\",\n    \"goVersion\": \"go1.26\",\n    \"platform\": \"linux/amd64\"\n}\n"},
		{outputYAML, "goVersion: go1.26\nplatform: linux/amd64\nversion: v1.2.3\n"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if err := writeStructured(&out, tt.format, v); err != nil || out.String() != tt.want {
			t.Errorf("%s: %v\ngot\n%s\nwant\n%s", tt.format, err, out.String(), tt.want)
		}
	}
	if err := writeStructured(&bytes.Buffer{}, "xml", v); err == nil {
		t.Error("xml must be refused")
	}
}

// TestDescribeObjects checks describe -o: the objects kubectl get -o
// prints, typed, from a real local API.
func TestDescribeObjects(t *testing.T) {
	src := &apiSource{pods: []v1.Pod{*fullPod(), *invalidManifestPod(), *terminatingPod()}}
	src.pods[2].Name = "zeta"
	src.node.Name = "node-1"
	src.node.Status.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}
	hs := httptest.NewServer(server.New("", src, nil, slog.New(slog.DiscardHandler)).Handler())
	t.Cleanup(hs.Close)

	out, err := runBerth(t, "", "describe", "pod", "web", "-o", "yaml", "--server", hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	var p v1.Pod
	if err := yaml.UnmarshalStrict([]byte(out), &p); err != nil {
		t.Fatalf("describe -o yaml is no Pod: %v\n%s", err, out)
	}
	if p.APIVersion != "v1" || p.Kind != "Pod" || p.Name != "web" || p.Status.PodIP != "10.88.0.5" ||
		len(p.Status.ContainerStatuses) != 1 {
		t.Errorf("describe -o yaml:\n%s", out)
	}
	if !strings.HasPrefix(out, "apiVersion: v1\nkind: Pod\nmetadata:\n") {
		t.Errorf("yaml begins\n%s", out[:min(len(out), 80)])
	}

	out, err = runBerth(t, "", "describe", "pods", "-o", "json", "--server", hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	var list v1.PodList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "PodList" || len(list.Items) != 3 || list.Items[0].Name != "api" || list.Items[2].Name != "zeta" ||
		list.Items[0].Kind != "Pod" {
		t.Errorf("describe pods -o json: %s %d items", list.Kind, len(list.Items))
	}

	out, err = runBerth(t, "", "describe", "pods", "-n", "empty", "-o", "json", "--server", hs.URL)
	if err != nil || !strings.Contains(out, `"items": []`) {
		t.Errorf("an empty namespace is an empty list: %v\n%s", err, out)
	}

	out, err = runBerth(t, "", "describe", "node", "-o", "json", "--server", hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	var node v1.Node
	if err := json.Unmarshal([]byte(out), &node); err != nil || node.Kind != "Node" || node.Name != "node-1" {
		t.Errorf("describe node -o json: %v\n%s", err, out)
	}

	_, err = runBerth(t, "", "describe", "pod", "nope", "-o", "yaml", "--server", hs.URL)
	if err == nil || err.Error() != "pod default/nope not found" || exitCode(err) != exitNotFound {
		t.Errorf("unknown pod: %v", err)
	}
}

// TestRawOutputs checks that the commands printing the local API's own
// answers take json and yaml alike.
func TestRawOutputs(t *testing.T) {
	src := &apiSource{
		images:  []images.ImageStatus{{ID: "sha256:abc", RepoTags: []string{"busybox:1"}, Size: 10, Verdict: "in use"}},
		devices: devicemanager.Snapshot{Resources: []devicemanager.ResourceStatus{{Name: "example.com/widget", Capacity: 1}}},
	}
	hs := httptest.NewServer(server.New("", src, nil, slog.New(slog.DiscardHandler)).Handler())
	t.Cleanup(hs.Close)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"images", "-o", "yaml"}, "- id: sha256:abc\n  inUse: false\n  pinned: false\n  repoTags:\n  - busybox:1\n  size: 10\n  verdict: in use\n"},
		{[]string{"images", "-o", "json"}, "\"verdict\": \"in use\""},
		{[]string{"devices", "-o", "yaml"}, "- allocatable: 0\n  capacity: 1\n  connected: false\n  devices: null\n  listed: false\n  name: example.com/widget\n"},
		{[]string{"version", "-o", "yaml"}, "version: test\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, err := runBerth(t, "", append(tt.args, "--server", hs.URL)...)
			if tt.args[0] == "version" {
				out, err = runBerth(t, "", tt.args...)
			}
			if err != nil || !strings.Contains(out, tt.want) {
				t.Errorf("%v\n%s\nwant it to hold\n%s", err, out, tt.want)
			}
		})
	}
}

// TestDescribeColorFlag runs describe with --color=always: states and
// warnings come coloured even into a buffer.
func TestDescribeColorFlag(t *testing.T) {
	w := fullPod()
	src := &apiSource{pods: []v1.Pod{*w}, events: map[string][]v1.Event{
		"default/web": {event(v1.EventTypeWarning, "Unhealthy", "probe failed", 1, time.Minute, time.Minute)},
	}}
	hs := httptest.NewServer(server.New("", src, nil, slog.New(slog.DiscardHandler)).Handler())
	t.Cleanup(hs.Close)
	out, err := runBerth(t, "", "describe", "web", "--color=always", "--server", hs.URL)
	if err != nil || !strings.Contains(out, "\x1b[32mRunning\x1b[0m") || !strings.Contains(out, "\x1b[33mWarning\x1b[0m") {
		t.Errorf("--color=always: %v\n%q", err, out)
	}
	out, err = runBerth(t, "", "describe", "web", "--server", hs.URL)
	if err != nil || strings.Contains(out, "\x1b") {
		t.Errorf("auto into a buffer must not colour: %v\n%q", err, out)
	}
}
