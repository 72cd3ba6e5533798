package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRetry(t *testing.T) {
	boom := errors.New("ttrpc: closed")
	for _, tc := range []struct {
		name      string
		failures  int
		wantCalls int
		wantErr   bool
	}{
		{"first try", 0, 1, false},
		{"second try", 1, 2, false},
		{"last try", 2, 3, false},
		{"never", 5, 3, true},
	} {
		calls := 0
		err := retry(context.Background(), 3, time.Millisecond, func() error {
			calls++
			if calls <= tc.failures {
				return boom
			}
			return nil
		})
		if calls != tc.wantCalls || (err != nil) != tc.wantErr {
			t.Errorf("%s: %d calls, err %v; want %d calls, error %t", tc.name, calls, err, tc.wantCalls, tc.wantErr)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	if err := retry(ctx, 3, time.Hour, func() error { calls++; return boom }); err != boom || calls != 1 {
		t.Errorf("with ctx done: %d calls, err %v; want 1 call and its error", calls, err)
	}
}
