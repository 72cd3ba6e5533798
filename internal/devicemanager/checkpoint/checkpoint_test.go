package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint/internal/checksum"
	v1 "github.com/berth-dev/berth/internal/devicemanager/checkpoint/internal/v1"
)

// testdataDir holds checkpoint files written by the real kubelet; it lives in
// ../shared beside the repository, four levels above this package.
func testdataDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "..", "shared", "testdata", "checkpoint")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("kubelet checkpoint testdata missing (../shared must sit beside the repository): %v", err)
	}
	return dir
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdataDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type kubeletFile struct {
	file     string
	format   Format // 0: corrupt
	checksum uint64
	errParts []string
}

// kubeletFiles is the verdict on every file in the testdata directory, with
// the checksum its README states.
func kubeletFiles() []kubeletFile {
	return []kubeletFile{
		{file: "v2_single_numa.json", format: FormatV2, checksum: 3110127662},
		{file: "v2_empty.json", format: FormatV2, checksum: 3467439661},
		{file: "v1_k8s113_testcheckpoint_full.json", format: FormatV1, checksum: 3854436589},
		{file: "v2_corrupted.json", errParts: []string{"checksum mismatch", "stored 455390218", "computed 3781352438", "v2 format"}},
	}
}

func TestEveryTestdataFileHasAVerdict(t *testing.T) {
	names, err := filepath.Glob(filepath.Join(testdataDir(t), "*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, name := range names {
		if !slices.ContainsFunc(kubeletFiles(), func(f kubeletFile) bool { return f.file == filepath.Base(name) }) {
			t.Errorf("%s has no entry in kubeletFiles", name)
		}
	}
}

func TestDecodeKubeletFiles(t *testing.T) {
	for _, tc := range kubeletFiles() {
		t.Run(tc.file, func(t *testing.T) {
			b := readTestdata(t, tc.file)
			entries, registered, format, err := Decode(b)
			if tc.format == 0 {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Decode: err %v, want ErrCorrupt", err)
				}
				for _, part := range tc.errParts {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not say %q", err, part)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if format != tc.format {
				t.Fatalf("format %v, want %v", format, tc.format)
			}
			var stored struct{ Checksum uint64 }
			if err := json.Unmarshal(b, &stored); err != nil || stored.Checksum != tc.checksum {
				t.Errorf("stored checksum %d, %v; the README says %d", stored.Checksum, err, tc.checksum)
			}
			if registered == nil {
				t.Error("registered devices map is nil")
			}
			reencoded, err := Encode(entries, registered)
			if err != nil {
				t.Fatal(err)
			}
			if format == FormatV2 && !bytes.Equal(reencoded, b) {
				t.Errorf("Encode differs from the kubelet's bytes:\n got %s\nwant %s", reencoded, b)
			}
			e2, r2, f2, err := Decode(reencoded)
			if err != nil || f2 != FormatV2 || !reflect.DeepEqual(e2, entries) || !reflect.DeepEqual(r2, registered) {
				t.Errorf("re-encoded file decodes as %v, %v, %v, %v; want %v, %v, v2", e2, r2, f2, err, entries, registered)
			}
		})
	}
}

func TestDecodeConvertsV1(t *testing.T) {
	b := readTestdata(t, "v1_k8s113_testcheckpoint_full.json")
	var old v1.Data
	if err := json.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	entries, registered, format, err := Decode(b)
	if err != nil || format != FormatV1 {
		t.Fatalf("Decode: format %v, err %v; want v1", format, err)
	}
	if len(entries) != len(old.Data.PodDeviceEntries) || len(entries) != 4 {
		t.Fatalf("%d entries, want 4", len(entries))
	}
	for i, o := range old.Data.PodDeviceEntries {
		want := PodDevicesEntry{
			PodUID:        o.PodUID,
			ContainerName: o.ContainerName,
			ResourceName:  o.ResourceName,
			DeviceIDs:     DevicesPerNUMA{-1: o.DeviceIDs},
			AllocResp:     o.AllocResp,
		}
		if !reflect.DeepEqual(entries[i], want) {
			t.Errorf("entry %d = %+v, want %+v", i, entries[i], want)
		}
	}
	if got := entries[0].DeviceIDs[-1]; !slices.Equal(got, []string{"dev1", "dev2"}) {
		t.Errorf("entry 0 devices %v, want [dev1 dev2] on node -1", got)
	}
	if !reflect.DeepEqual(registered, old.Data.RegisteredDevices) {
		t.Errorf("registered %v, want %v", registered, old.Data.RegisteredDevices)
	}
}

// TestHashInput pins the text that is hashed to the text the kubelet hashed,
// both the hand-printed text and go-spew's.
func TestHashInput(t *testing.T) {
	tests := []struct {
		file string
		// parse returns the value to hash, its printer and the stored
		// checksum.
		parse func([]byte) (any, func(*checksum.Printer), uint64, error)
	}{
		{"v2_single_numa", parseV2},
		{"v2_empty", parseV2},
		{"v1_k8s113_testcheckpoint_full", func(b []byte) (any, func(*checksum.Printer), uint64, error) {
			var d v1.Data
			err := json.Unmarshal(b, &d)
			return d.Data, func(p *checksum.Printer) { printV1(p, &d) }, d.Checksum, err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			hashed, print, stored, err := tc.parse(readTestdata(t, tc.file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			want := string(readTestdata(t, tc.file+".hashinput.txt"))
			if got := checksum.Text(print); got != want {
				t.Errorf("hash input differs:\n got %s\nwant %s", got, want)
			}
			if got := spewText(hashed); got != want {
				t.Errorf("go-spew's hash input differs:\n got %s\nwant %s", got, want)
			}
			if got := checksum.Sum(print); got != stored {
				t.Errorf("checksum %d, stored %d", got, stored)
			}
		})
	}
}

func parseV2(b []byte) (any, func(*checksum.Printer), uint64, error) {
	var d data
	err := json.Unmarshal(b, &d)
	return d.Data, d.Data.print, d.Checksum, err
}

func TestDecodeRejects(t *testing.T) {
	single := string(readTestdata(t, "v2_single_numa.json"))
	old := string(readTestdata(t, "v1_k8s113_testcheckpoint_full.json"))
	tests := []struct {
		name     string
		in       string
		errParts []string
	}{
		{"empty file", "", []string{"not in any known format", "v2 format", "v1 format", "unexpected end of JSON input"}},
		{"not JSON", "kubelet", []string{"not in any known format"}},
		{"truncated", single[:len(single)/2], []string{"not in any known format"}},
		{"trailing bytes", single + "x", []string{"not in any known format"}},
		{"JSON null", "null", []string{"checksum mismatch", "stored 0", "v2 format"}},
		{"empty object", "{}", []string{"checksum mismatch", "stored 0"}},
		{"DeviceIDs in neither shape", strings.Replace(single, `{"0":["dev1","dev2"]}`, `7`, 1),
			[]string{"not in any known format", "DeviceIDs"}},
		{"checksum as a string", strings.Replace(single, `3110127662`, `"3110127662"`, 1),
			[]string{"not in any known format", "Checksum"}},
		{"negative checksum", strings.Replace(single, `3110127662`, `-1`, 1), []string{"not in any known format"}},
		{"checksum off by 2^32", strings.Replace(single, `3110127662`, `7405094958`, 1),
			[]string{"checksum mismatch", "stored 7405094958", "computed 3110127662"}},
		{"v2 device changed", strings.Replace(single, `"dev2"]}`, `"dev9"]}`, 1), []string{"checksum mismatch", "stored 3110127662"}},
		{"v1 device changed", strings.Replace(old, `["dev3"]`, `["dev9"]`, 1),
			[]string{"checksum mismatch", "stored 3854436589", "v1 format"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entries, registered, format, err := Decode([]byte(tc.in))
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode = %v, %v, %v, %v; want ErrCorrupt", entries, registered, format, err)
			}
			for _, part := range tc.errParts {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not say %q", err, part)
				}
			}
		})
	}
}

// TestDecodeTolerates covers what json.Unmarshal, and so the kubelet, accepts.
func TestDecodeTolerates(t *testing.T) {
	single := readTestdata(t, "v2_single_numa.json")
	var indented bytes.Buffer
	if err := json.Indent(&indented, single, "", "  "); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []byte
	}{
		{"indented", indented.Bytes()},
		// Newer kubelets add BootID beside Checksum, outside the checksum.
		{"unknown BootID field", append(bytes.TrimSuffix(slices.Clone(single), []byte("}")), []byte(`,"BootID":"4f1e"}`)...)},
	}
	want, _, _, err := Decode(single)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, format, err := Decode(tc.in)
			if err != nil || format != FormatV2 || !reflect.DeepEqual(got, want) {
				t.Errorf("Decode = %v, %v, %v; want %v, v2", got, format, err, want)
			}
		})
	}
}

// TestNUMAKeyOrder: JSON sorts the NUMA keys as strings, the hashed text as
// numbers; both must match the kubelet's.
func TestNUMAKeyOrder(t *testing.T) {
	entries := []PodDevicesEntry{{
		PodUID: "uid", ContainerName: "c", ResourceName: "example.com/dev",
		DeviceIDs: DevicesPerNUMA{10: {"a"}, -1: {"b"}, 2: {"c"}, 0: {"d"}},
	}}
	b, err := Encode(entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"DeviceIDs":{"-1":["b"],"0":["d"],"10":["a"],"2":["c"]}`; !bytes.Contains(b, []byte(want)) {
		t.Errorf("JSON %s does not contain %s", b, want)
	}
	d := checkpointData{PodDeviceEntries: entries, RegisteredDevices: map[string][]string{}}
	for _, in := range []string{checksum.Text(d.print), spewText(d)} {
		if want := `DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[b] 0:[d] 2:[c] 10:[a]]`; !strings.Contains(in, want) {
			t.Errorf("hash input %s does not contain %s", in, want)
		}
	}
	got, _, _, err := Decode(b)
	if err != nil || !reflect.DeepEqual(got, entries) {
		t.Errorf("Decode = %v, %v; want %v", got, err, entries)
	}
}

func TestEncodeNullAndEmptyEntries(t *testing.T) {
	null, err := Encode(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := readTestdata(t, "v2_empty.json"); !bytes.Equal(null, want) {
		t.Errorf("Encode(nil, nil) = %s, want the kubelet's %s", null, want)
	}
	empty, err := Encode([]PodDevicesEntry{}, map[string][]string{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(empty, []byte(`"PodDeviceEntries":[]`)) {
		t.Errorf("Encode([]) = %s, want PodDeviceEntries []", empty)
	}
	var n, e data
	if err := errors.Join(json.Unmarshal(null, &n), json.Unmarshal(empty, &e)); err != nil {
		t.Fatal(err)
	}
	if n.Checksum == e.Checksum {
		t.Errorf("null and [] entries both hash to %d", n.Checksum)
	}
	got, _, _, err := Decode(empty)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("Decode([]) = %#v, %v; want empty, non-nil", got, err)
	}
}

func TestEncodeRejectsInvalidUTF8(t *testing.T) {
	const bad = "gpu-\xff"
	tests := []struct {
		name       string
		entries    []PodDevicesEntry
		registered map[string][]string
		field      string
	}{
		{"pod UID", []PodDevicesEntry{{PodUID: bad}}, nil, "PodDeviceEntries[0].PodUID"},
		{"resource name", []PodDevicesEntry{{}, {ResourceName: bad}}, nil, "PodDeviceEntries[1].ResourceName"},
		{"device ID", []PodDevicesEntry{{DeviceIDs: DevicesPerNUMA{1: {"ok", bad}}}}, nil, "PodDeviceEntries[0].DeviceIDs[1][1]"},
		{"registered resource", nil, map[string][]string{bad: nil}, "RegisteredDevices key"},
		{"registered device", nil, map[string][]string{"r": {bad}}, `RegisteredDevices["r"][0]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(tc.entries, tc.registered)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Encode = %s, %v; want an error naming %s", b, err, tc.field)
			}
		})
	}
}

func TestFormatString(t *testing.T) {
	for f, want := range map[Format]string{FormatV2: "v2", FormatV1: "v1", 0: "Format(0)"} {
		if got := f.String(); got != want {
			t.Errorf("Format(%d).String() = %q, want %q", int(f), got, want)
		}
	}
}
