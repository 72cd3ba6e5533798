package checkpoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzDecode: Decode never panics, and whatever it accepts re-encodes to a
// current-format file that decodes to the same data. Fuzzed bytes almost never
// carry a matching checksum, so each input that parses is also re-encoded with
// a fresh checksum and must then be accepted unchanged: that exercises Encode
// and the accepting path of Decode on arbitrary data.
func FuzzDecode(f *testing.F) {
	names, err := filepath.Glob(filepath.Join(testdataDir(f), "*.json"))
	if err != nil || len(names) == 0 {
		f.Fatalf("no seed files: %v", err)
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{"", "null", "{}", `{"Data":{"PodDeviceEntries":[]}}`} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, b []byte) {
		if entries, registered, _, err := Decode(b); err == nil {
			roundTrip(t, entries, registered)
		}
		var d data
		if json.Unmarshal(b, &d) == nil {
			registered := d.Data.RegisteredDevices
			if registered == nil {
				registered = map[string][]string{}
			}
			roundTrip(t, d.Data.PodDeviceEntries, registered)
		}
	})
}

func roundTrip(t *testing.T, entries []PodDevicesEntry, registered map[string][]string) {
	t.Helper()
	b, err := Encode(entries, registered)
	if err != nil {
		t.Fatalf("Encode of decoded data: %v", err)
	}
	e2, r2, format, err := Decode(b)
	if err != nil || format != FormatV2 {
		t.Fatalf("Decode(Encode(x)) = %v, %v; want v2\n%s", format, err, b)
	}
	if !reflect.DeepEqual(e2, entries) || !reflect.DeepEqual(r2, registered) {
		t.Fatalf("round trip changed the data:\n got %#v %#v\nwant %#v %#v", e2, r2, entries, registered)
	}
}
