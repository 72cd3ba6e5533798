package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/bench"
)

func TestCheckCompareRefuses(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(notExec, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "fake-kubelet")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'Something else 1.0'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, compare string
		external      bool
		opts          bench.CompareOptions
		want          []string
	}{
		{"unknown agent", "docker", false, bench.CompareOptions{Kubelet: fake, Runs: 1}, []string{"--compare", `"docker"`, "kubelet"}},
		{"no binary", "kubelet", false, bench.CompareOptions{Runs: 2}, []string{"--kubelet-bin"}},
		{"no runs", "kubelet", false, bench.CompareOptions{Kubelet: fake, Runs: 0}, []string{"--compare-runs", "at least 1"}},
		{"missing binary", "kubelet", false, bench.CompareOptions{Kubelet: filepath.Join(dir, "nope"), Runs: 1}, []string{"--kubelet-bin", "nope", "not a usable kubelet"}},
		{"not executable", "kubelet", false, bench.CompareOptions{Kubelet: notExec, Runs: 1}, []string{"--kubelet-bin", notExec, "not a usable kubelet"}},
		{"not a kubelet", "kubelet", false, bench.CompareOptions{Kubelet: fake, Runs: 1}, []string{"--kubelet-bin", fake, "not a kubelet", "Something else"}},
		{"external twice", "kubelet", true, bench.CompareOptions{Kubelet: fake, Runs: 1}, []string{"--external-runtime", "--compare", "already"}},
	} {
		opts := tc.opts
		err := checkCompare(context.Background(), tc.compare, tc.external, &opts)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, w)
			}
		}
	}
}

func TestCheckCompareAccepts(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'Kubernetes v1.36.3'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Relative, as a user may give it: made absolute, for the node's
	// process runs elsewhere.
	t.Chdir(dir)
	opts := bench.CompareOptions{Kubelet: "kubelet", Runs: 2}
	if err := checkCompare(context.Background(), "kubelet", false, &opts); err != nil {
		t.Fatal(err)
	}
	if opts.Kubelet != fake {
		t.Errorf("kubelet %q, want %q", opts.Kubelet, fake)
	}
	// Without --compare a kubelet binary is not used, so not checked.
	opts = bench.CompareOptions{Kubelet: filepath.Join(dir, "nope"), Runs: 0}
	if err := checkCompare(context.Background(), "", true, &opts); err != nil || opts.Kubelet != "" {
		t.Errorf("without --compare: %v, kubelet %q; want no error and no kubelet", err, opts.Kubelet)
	}
}

// --report prints an earlier run's table with the targets evaluated anew,
// and refuses a file it cannot read as a report of its schema.
func TestPrintReport(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "bench.json")
	r := &bench.Report{Schema: bench.SchemaVersion, Idle: []bench.IdleResult{{WindowSeconds: 30, Berth: bench.Usage{Cores: 0.001, PeakRSS: 31}}},
		Targets: []bench.Target{{Name: "an old target", Met: true}}}
	if err := writeJSON(good, r); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := printReport(&b, good); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"IDLE (no pods, 30 s)", "idle: berth CPU", "idle: berth peak RSS", "MISSED"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "an old target") {
		t.Errorf("the report's own targets were printed, not evaluated anew:\n%s", b.String())
	}

	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte(`{"schema": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(dir, "table.txt")
	if err := os.WriteFile(notJSON, []byte("START-UP"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{old: "schema 1", notJSON: notJSON, filepath.Join(dir, "nope.json"): "nope.json"} {
		if err := printReport(&b, path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", path, err, want)
		}
	}
}
