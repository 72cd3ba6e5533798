package main

import (
	"strings"
	"testing"
	"time"
)

func TestLogQueryFrom(t *testing.T) {
	for _, tt := range []struct {
		name     string
		q        logQuery
		since    time.Duration
		sinceSet bool
		limitSet bool
		want     string // the query's encoding
		wantErr  string
	}{
		{name: "nothing", q: logQuery{tailLines: -1}},
		{name: "since in whole seconds", q: logQuery{tailLines: -1}, since: time.Hour, sinceSet: true, want: "sinceSeconds=3600"},
		{name: "since rounded up", q: logQuery{tailLines: -1}, since: 1500 * time.Millisecond, sinceSet: true, want: "sinceSeconds=2"},
		{name: "since zero", q: logQuery{tailLines: -1}, sinceSet: true, wantErr: "--since 0s: must be greater than 0"},
		{name: "since time", q: logQuery{tailLines: -1, sinceTime: "2026-05-01T10:00:00+02:00"}, want: "sinceTime=2026-05-01T10%3A00%3A00%2B02%3A00"},
		{name: "since time not RFC 3339", q: logQuery{tailLines: -1, sinceTime: "yesterday"}, wantErr: `--since-time "yesterday": not an RFC 3339 time`},
		{name: "both since flags", q: logQuery{tailLines: -1, sinceTime: "2026-05-01T10:00:00Z"}, since: time.Minute, sinceSet: true,
			wantErr: "at most one"},
		{name: "limit bytes", q: logQuery{tailLines: 5, limitBytes: 100}, limitSet: true, want: "limitBytes=100&tailLines=5"},
		{name: "limit bytes zero", q: logQuery{tailLines: -1}, limitSet: true, wantErr: "--limit-bytes 0: must be greater than 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, err := logQueryFrom(tt.q, tt.since, tt.sinceSet, tt.limitSet)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := q.values().Encode(); got != tt.want {
				t.Errorf("query %q, want %q", got, tt.want)
			}
		})
	}
}
