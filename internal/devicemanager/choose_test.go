package devicemanager

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

func TestChooseDevices(t *testing.T) {
	for _, tc := range []struct {
		name          string
		needed        int
		reusable      []string
		available     []string
		preferred     []string
		want          []string
		wantPreferred bool
		wantErr       string
	}{
		{name: "in ID order", needed: 2, available: []string{"c", "a", "b"}, want: []string{"a", "b"}, wantPreferred: true},
		{name: "all of them", needed: 3, available: []string{"c", "a", "b"}, want: []string{"a", "b", "c"}},
		{name: "the plugin's preference first", needed: 2, available: []string{"a", "b", "c", "d"},
			preferred: []string{"d", "b"}, want: []string{"d", "b"}, wantPreferred: true},
		{name: "a preference for devices not available is ignored", needed: 2, available: []string{"a", "b", "c"},
			preferred: []string{"z", "c", "c"}, want: []string{"c", "a"}, wantPreferred: true},
		{name: "a preference longer than the need is cut", needed: 1, available: []string{"a", "b"},
			preferred: []string{"b", "a"}, want: []string{"b"}, wantPreferred: true},
		{name: "init containers' devices first", needed: 2, reusable: []string{"x"}, available: []string{"a", "b"},
			want: []string{"x", "a"}, wantPreferred: true},
		{name: "reuse covers it all", needed: 1, reusable: []string{"y", "x"}, available: nil, want: []string{"x"}},
		{name: "not enough", needed: 3, available: []string{"a", "b"},
			wantErr: "requested number of devices unavailable for example.com/widget. Requested: 3, Available: 2"},
		{name: "not enough after reuse", needed: 3, reusable: []string{"x"}, available: []string{"a"},
			wantErr: "Requested: 2, Available: 1"},
		{name: "reused devices are not counted twice", needed: 2, reusable: []string{"a"}, available: []string{"a"},
			wantErr: "Requested: 1, Available: 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := chooseFrom("example.com/widget", tc.needed, sets.New(tc.reusable...), sets.New(tc.available...))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ch.needsPreference(); got != tc.wantPreferred {
				t.Errorf("needsPreference = %v, want %v", got, tc.wantPreferred)
			}
			if got := ch.finish(tc.preferred); !slices.Equal(got, tc.want) {
				t.Errorf("finish = %v, want %v", got, tc.want)
			}
		})
	}
}
