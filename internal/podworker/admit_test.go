package podworker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/lifecycle"
)

func TestAdmitVerdict(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	notReady := &devicemanager.NotReadyError{Resource: "example.com/widget"}
	for _, tc := range []struct {
		name        string
		err         error
		since, now  time.Time
		wait        time.Duration
		wantSince   time.Time
		wantMessage string // "" = keep waiting
	}{
		{name: "first wait starts the clock", err: notReady, now: t0, wait: time.Minute, wantSince: t0},
		{name: "still inside the wait", err: notReady, since: t0, now: t0.Add(59 * time.Second), wait: time.Minute, wantSince: t0},
		{name: "the wait is over", err: notReady, since: t0, now: t0.Add(time.Minute), wait: time.Minute,
			wantMessage: "Allocate failed due to no device plugin for example.com/widget has registered after waiting 1m0s for it, which is unexpected"},
		{name: "no wait configured", err: notReady, now: t0, wait: 0,
			wantMessage: "after waiting 0s"},
		{name: "too few devices rejects at once", err: errors.New("requested number of devices unavailable for example.com/widget. Requested: 3, Available: 1"),
			since: t0, now: t0, wait: time.Hour,
			wantMessage: "Allocate failed due to requested number of devices unavailable for example.com/widget. Requested: 3, Available: 1, which is unexpected"},
		{name: "a wrapped not-ready error still waits", err: errors.Join(errors.New("ctx"), notReady), now: t0, wait: time.Minute, wantSince: t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			since, rej := admitVerdict(tc.err, tc.since, tc.now, tc.wait)
			if tc.wantMessage == "" {
				if rej != nil || !since.Equal(tc.wantSince) {
					t.Errorf("got since=%v rej=%+v, want to wait since %v", since, rej, tc.wantSince)
				}
				return
			}
			if rej == nil || rej.reason != devicemanager.ReasonUnexpectedAdmissionError || !strings.Contains(rej.message, tc.wantMessage) {
				t.Errorf("got rejection %+v, want %s containing %q", rej, devicemanager.ReasonUnexpectedAdmissionError, tc.wantMessage)
			}
		})
	}
	st := lifecycle.RejectedStatus("UnexpectedAdmissionError", "Allocate failed")
	if st.Phase != "Failed" || st.Message != "Pod was rejected: Allocate failed" {
		t.Errorf("rejected status = %+v", st)
	}
}
