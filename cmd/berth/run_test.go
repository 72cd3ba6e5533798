package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestNewLogger(t *testing.T) {
	tests := []struct {
		name, level, format string
		wantJSON            bool
		wantDebug           bool
	}{
		{name: "not a terminal: JSON", level: "info", wantJSON: true},
		{name: "text asked for", level: "info", format: "text"},
		{name: "json asked for", level: "debug", format: "json", wantJSON: true, wantDebug: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := newLogger(&buf, tt.level, tt.format)
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("debugging", "pod", "default/web")
			log.Info("started container", "pod", "default/web", "container", "app")
			out := buf.String()
			if got := strings.Contains(out, "debugging"); got != tt.wantDebug {
				t.Errorf("debug line logged: %v, want %v", got, tt.wantDebug)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			last := lines[len(lines)-1]
			var record map[string]any
			isJSON := json.Unmarshal([]byte(last), &record) == nil
			if isJSON != tt.wantJSON {
				t.Fatalf("JSON: %v, want %v: %q", isJSON, tt.wantJSON, last)
			}
			if isJSON && (record["pod"] != "default/web" || record["container"] != "app") {
				t.Errorf("record %v lacks the pod and container", record)
			}
			if !isJSON && !strings.Contains(last, "pod=default/web container=app") {
				t.Errorf("line %q lacks the pod and container", last)
			}
		})
	}
	if _, err := newLogger(os.Stderr, "info", "xml"); err == nil {
		t.Error("format xml accepted")
	}
}
