package logs

import (
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestParseLine(t *testing.T) {
	ts := "2024-05-01T10:20:30.123456789Z"
	tests := []struct {
		name    string
		line    string
		ok      bool
		stream  runtimeapi.LogStreamType
		partial bool
		content string
	}{
		{name: "full stdout", line: ts + " stdout F hello world", ok: true, stream: runtimeapi.Stdout, content: "hello world"},
		{name: "partial", line: ts + " stdout P hel", ok: true, stream: runtimeapi.Stdout, partial: true, content: "hel"},
		{name: "stderr", line: ts + " stderr F oops", ok: true, stream: runtimeapi.Stderr, content: "oops"},
		{name: "empty content", line: ts + " stdout F ", ok: true, stream: runtimeapi.Stdout, content: ""},
		{name: "content keeps its spaces", line: ts + " stdout F  a  b ", ok: true, stream: runtimeapi.Stdout, content: " a  b "},
		{name: "sub-tags", line: ts + " stdout P:x:y abc", ok: true, stream: runtimeapi.Stdout, partial: true, content: "abc"},
		{name: "unknown tag ends the line", line: ts + " stdout Q abc", ok: true, stream: runtimeapi.Stdout, content: "abc"},
		{name: "time zone offset", line: "2024-05-01T12:20:30.1+02:00 stdout F x", ok: true, stream: runtimeapi.Stdout, content: "x"},
		{name: "no tag delimiter", line: ts + " stdout F", ok: false},
		{name: "no stream", line: ts, ok: false},
		{name: "bad timestamp", line: "yesterday stdout F x", ok: false},
		{name: "bad stream", line: ts + " stdin F x", ok: false},
		{name: "plain text", line: "just some text", ok: false},
		{name: "empty", line: "", ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := parseLine([]byte(tt.line))
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if e.stream != tt.stream || e.partial != tt.partial || string(e.content) != tt.content {
				t.Errorf("got stream %q partial %v content %q", e.stream, e.partial, e.content)
			}
			if e.time.IsZero() || e.time.Year() != 2024 {
				t.Errorf("time = %v", e.time)
			}
		})
	}
	e, _ := parseLine([]byte(ts + " stdout F x"))
	if want := time.Date(2024, 5, 1, 10, 20, 30, 123456789, time.UTC); !e.time.Equal(want) || string(e.timestamp) != ts {
		t.Errorf("time %v timestamp %q", e.time, e.timestamp)
	}
}
