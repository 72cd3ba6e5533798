package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestAskYes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"y\n", true},
		{"Yes\n", true},
		{" y \n", true},
		{"y", true}, // no newline before EOF
		{"n\n", false},
		{"\n", false},
		{"yep\n", false},
		{"", false}, // a closed stdin is no consent
	} {
		var out bytes.Buffer
		got, err := askYes(strings.NewReader(tc.in), &out)
		if err != nil || got != tc.want {
			t.Errorf("askYes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if !strings.Contains(out.String(), "[y/N]") {
			t.Errorf("askYes(%q) asked %q", tc.in, out.String())
		}
	}
}
