package agent

import (
	"strings"
	"testing"
	"time"
)

func TestSyncLoopHealth(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		heartbeat int64
		wantErr   string
	}{
		{"not started", 0, "the sync loop has not started"},
		{"turned just now", now.UnixNano(), ""},
		{"at the threshold", now.Add(-syncLoopStallThreshold).UnixNano(), ""},
		{"stuck", now.Add(-syncLoopStallThreshold - time.Second).UnixNano(), "the sync loop has not turned for 1m31s (threshold 1m30s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := syncLoopHealth(tt.heartbeat, now, syncLoopStallThreshold)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}
