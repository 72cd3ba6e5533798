package main

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestColorEnabled(t *testing.T) {
	tests := []struct {
		mode     string
		terminal bool
		noColor  string
		term     string
		want     bool
	}{
		{colorAuto, true, "", "xterm-256color", true},
		{colorAuto, false, "", "xterm", false},
		{colorAuto, true, "1", "xterm", false},
		{colorAuto, true, "", "dumb", false},
		{colorAlways, false, "1", "dumb", true}, // the flag overrides NO_COLOR
		{colorNever, true, "", "xterm", false},
	}
	for _, tt := range tests {
		if got := colorEnabled(tt.mode, tt.terminal, tt.noColor, tt.term); got != tt.want {
			t.Errorf("colorEnabled(%q, terminal %v, NO_COLOR=%q, TERM=%q) = %v, want %v",
				tt.mode, tt.terminal, tt.noColor, tt.term, got, tt.want)
		}
	}
}

func TestStatusTone(t *testing.T) {
	tests := map[string]tone{
		"Running": toneGood, "Succeeded": toneGood, "Completed": toneGood,
		"Pending": toneWarn, "ContainerCreating": toneWarn, "PodInitializing": toneWarn, "Terminating": toneWarn,
		"NotReady": toneWarn, "Init:0/2": toneWarn, "Init:10/12": toneWarn, "Waiting": toneWarn, "Unknown": toneWarn,
		"CrashLoopBackOff": toneBad, "ImagePullBackOff": toneBad, "ErrImagePull": toneBad, "Error": toneBad,
		"CreateContainerConfigError": toneBad, "Init:Error": toneBad, "Init:CrashLoopBackOff": toneBad,
		"ExitCode:3": toneBad, "Init:ExitCode:2": toneBad, "Signal:9": toneBad, "OOMKilled": toneBad,
		"InvalidManifest": toneBad, "Evicted": toneBad, "Preempting": toneBad, "OutOfcpu": toneBad,
		"UnexpectedAdmissionError": toneBad, "Failed": toneBad,
		"Terminated": toneNone, "Init:": toneNone, "Init:1/": toneNone, "SomethingNew": toneNone, "": toneNone,
	}
	for status, want := range tests {
		if got := statusTone(status); got != want {
			t.Errorf("statusTone(%q) = %d, want %d", status, got, want)
		}
	}
	if got := podTone(v1.PodFailed, "SomethingNew"); got != toneBad {
		t.Errorf("a failed pod with an unknown reason: tone %d, want bad", got)
	}
	if got := podTone(v1.PodRunning, "SomethingNew"); got != toneNone {
		t.Errorf("a running pod with an unknown reason: tone %d, want none", got)
	}
	if eventTone(v1.EventTypeWarning) != toneWarn || eventTone(v1.EventTypeNormal) != toneNone {
		t.Error("warnings are yellow, normal events plain")
	}
}

func TestPalette(t *testing.T) {
	off, on := palette{}, palette{on: true}
	if off.paint(toneBad, "Error") != "Error" || off.cell(toneBad, "Error") != "Error" {
		t.Error("a palette that is off must not change text")
	}
	if got := on.paint(toneBad, "Error"); got != "\x1b[31mError\x1b[0m" {
		t.Errorf("paint = %q", got)
	}
	if got := on.paint(toneNone, "Terminated"); got != "Terminated" {
		t.Errorf("paint without a tone = %q", got)
	}
	// Cells of one column carry the same invisible length, whatever
	// their tone, so that tabwriter aligns them right.
	for _, tn := range []tone{toneNone, toneGood, toneWarn, toneBad} {
		if got := on.cell(tn, "x"); len(got) != len("x")+9 {
			t.Errorf("cell of tone %d = %q: %d invisible bytes, want 9", tn, got, len(got)-1)
		}
	}
}

func TestDescriptionColors(t *testing.T) {
	text := describePod(fullPod(), admissionRecord{}, []v1.Event{
		event(v1.EventTypeNormal, "Pulled", "already present", 1, time.Minute, time.Minute),
		event(v1.EventTypeWarning, "Unhealthy", "Warning: probe failed", 2, time.Minute, time.Second),
	}, now)
	if got := (palette{}).description(text); got != text {
		t.Errorf("without colour the description changed:\n%s", lineDiff(got, text))
	}
	colored := (palette{on: true}).description(text)
	if got := stripANSI(colored); got != text {
		t.Errorf("colours changed the text:\n%s", lineDiff(got, text))
	}
	wantLines := []string{
		"Status:               \x1b[32mRunning\x1b[0m",
		// Of the current state only; the last state keeps its plain Reason.
		"    State:          Terminated",
		"      Reason:       \x1b[32mCompleted\x1b[0m",
		"    State:          \x1b[32mRunning\x1b[0m",
		"      Reason:       Error",
		"  \x1b[33mWarning\x1b[0m  Unhealthy  1s (x2 over 60s)  berth  Warning: probe failed",
		"  Normal   Pulled     60s               berth  already present",
	}
	lines := strings.Split(colored, "\n")
	for _, want := range wantLines {
		found := false
		for _, l := range lines {
			found = found || l == want
		}
		if !found {
			t.Errorf("no line %q in\n%q", want, colored)
		}
	}
}

func TestDescriptionColorsWaitingAndTerminating(t *testing.T) {
	tests := []struct {
		text string
		want string
	}{
		{"Status:  Terminating (lasts 20s)\n", "Status:  \x1b[33mTerminating (lasts 20s)\x1b[0m\n"},
		{"Status:  Failed\n", "Status:  \x1b[31mFailed\x1b[0m\n"},
		{"    State:          Waiting\n      Reason:       CrashLoopBackOff\n",
			"    State:          \x1b[33mWaiting\x1b[0m\n      Reason:       \x1b[31mCrashLoopBackOff\x1b[0m\n"},
		// A Warning outside the events table is left alone.
		{"Message:  Warning here\n  Warning  x\n", "Message:  Warning here\n  Warning  x\n"},
		{"Events:  <none>\n", "Events:  <none>\n"},
	}
	for _, tt := range tests {
		if got := (palette{on: true}).description(tt.text); got != tt.want {
			t.Errorf("description(%q) =\n%q\nwant\n%q", tt.text, got, tt.want)
		}
	}
}
