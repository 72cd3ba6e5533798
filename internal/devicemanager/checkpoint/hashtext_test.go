package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/davecgh/go-spew/spew"
	"k8s.io/utils/dump"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint/internal/checksum"
	v1 "github.com/berth-dev/berth/internal/devicemanager/checkpoint/internal/v1"
)

// spewText is the oracle: the text the kubelet hashes, printed by go-spew
// itself as the kubelet's hashutil.DeepHashObject configures it.
func spewText(v any) string {
	cs := spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
	return cs.Sprintf("%#v", v)
}

func fnv32a(s string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return uint64(h.Sum32())
}

// v1Data builds a v1 file's data, whose checksummed part has an unexported
// type that only its fields can be set through.
func v1Data(entries []v1.PodDevicesEntry, registered map[string][]string) *v1.Data {
	var d v1.Data
	d.Data.PodDeviceEntries = entries
	d.Data.RegisteredDevices = registered
	return &d
}

// assertSpewV2 holds the fast printer of d, and the checksum Encode and
// Decode use, to go-spew. The text is compared as well as the hash so that a
// failure shows where the two part.
func assertSpewV2(t *testing.T, d checkpointData) {
	t.Helper()
	want := spewText(d)
	if got := checksum.Text(d.print); got != want {
		t.Fatalf("hash text differs from go-spew's %s", diffAt(got, want))
	}
	if got, want := d.sum(), fnv32a(want); got != want {
		t.Fatalf("checksum %d, go-spew's %d (the text matched)", got, want)
	}
}

func assertSpewV1(t *testing.T, d *v1.Data) {
	t.Helper()
	want := spewText(d.Data)
	if got := checksum.Text(func(p *checksum.Printer) { printV1(p, d) }); got != want {
		t.Fatalf("v1 hash text differs from go-spew's %s", diffAt(got, want))
	}
	if got, want := sumV1(d), fnv32a(want); got != want {
		t.Fatalf("v1 checksum %d, go-spew's %d (the text matched)", got, want)
	}
}

// diffAt shows where got and want first differ, with some context.
func diffAt(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-60)
	return fmt.Sprintf("at byte %d of %d (want %d):\n got …%q\nwant …%q",
		i, len(got), len(want), got[from:min(len(got), i+60)], want[from:min(len(want), i+60)])
}

// edgeStrings are strings whose printing could go wrong: spew prints them
// raw, so quotes, escapes, invalid UTF-8 and text that looks like spew's own
// punctuation must pass through untouched.
var edgeStrings = []string{
	"", "a", "dev1", "nvidia.com/gpu", `"quoted"`, `back\slash`, "new\nline", "tab\t", "nul\x00",
	"\x7f", "\x1b[0m", "é", "日本語", "\U0001F600", "\u2028", "<&>", "\xff\xfe", "\xc3", " ", "  lead", "trail ",
	":", "[", "]", "{", "}", "map[", "<nil>", "(string)", "%v", "%!v(PANIC=)", "%#v%%",
	"GPU-3a9c0000-5e1f-4c2a-9b7d-1f2e3d4c5b00::63", "0000:3b:02.1",
}

// edgeInts are NUMA nodes whose printing or ordering could go wrong.
var edgeInts = []int64{
	-1, 0, 1, 2, 9, 10, 11, 99, 100, 101, -10, -100, 1 << 31, -(1 << 31), 1 << 32,
	math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1,
}

// gen builds checkpoint values from a byte stream, so that the same code
// serves the seeded random test and the fuzzer. An exhausted stream reads as
// zeros, which choose the first (small, often nil) option everywhere.
type gen struct {
	b []byte
	// validUTF8 repairs the strings, for Encode, which refuses others.
	validUTF8 bool
}

func (g *gen) byte() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

// n is a number in [0, n).
func (g *gen) n(n int) int { return int(g.byte()) % n }

func (g *gen) str() string {
	var sb strings.Builder
	for range g.n(4) {
		if c := g.byte(); c < 64 {
			sb.WriteByte(g.byte()) // any byte at all
		} else {
			sb.WriteString(edgeStrings[int(c)%len(edgeStrings)])
		}
	}
	if g.validUTF8 {
		return strings.ToValidUTF8(sb.String(), "\uFFFD")
	}
	return sb.String()
}

func (g *gen) strs() []string {
	switch g.n(8) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	ss := make([]string, g.n(5)+1)
	for i := range ss {
		ss[i] = g.str()
	}
	return ss
}

func (g *gen) int64() int64 {
	switch c := g.byte(); {
	case c < 128:
		return edgeInts[int(c)%len(edgeInts)]
	case c < 192:
		return int64(c) - 160
	default:
		var b [8]byte
		for i := range b {
			b[i] = g.byte()
		}
		return int64(binary.LittleEndian.Uint64(b[:]))
	}
}

// bytesLens reach past spew's Dump hexdump rows of 16, which %#v must not
// use, and include the lengths just around them.
var bytesLens = []int{0, 1, 2, 15, 16, 17, 31, 32, 33, 48, 100, 255, 256, 257, 1000}

func (g *gen) bytes() []byte {
	switch c := g.n(16); c {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2, 3:
		n := bytesLens[g.n(len(bytesLens))]
		b := make([]byte, n)
		for i := range b {
			b[i] = g.byte()
		}
		return b
	case 4:
		// Every byte value, so that each digit count is crossed.
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	default:
		b := make([]byte, g.n(40))
		for i := range b {
			b[i] = g.byte()
		}
		return b
	}
}

func (g *gen) numa() DevicesPerNUMA {
	switch g.n(8) {
	case 0:
		return nil
	case 1:
		return DevicesPerNUMA{}
	}
	m := DevicesPerNUMA{}
	for range g.n(6) + 1 {
		m[g.int64()] = g.strs()
	}
	return m
}

func (g *gen) registered() map[string][]string {
	switch g.n(6) {
	case 0:
		return nil
	case 1:
		return map[string][]string{}
	}
	m := map[string][]string{}
	for range g.n(7) + 1 {
		m[g.str()] = g.strs()
	}
	return m
}

func (g *gen) v2() checkpointData {
	d := checkpointData{RegisteredDevices: g.registered()}
	switch g.n(6) {
	case 0:
		return d
	case 1:
		d.PodDeviceEntries = []PodDevicesEntry{}
		return d
	}
	d.PodDeviceEntries = make([]PodDevicesEntry, g.n(5)+1)
	for i := range d.PodDeviceEntries {
		d.PodDeviceEntries[i] = PodDevicesEntry{
			PodUID: g.str(), ContainerName: g.str(), ResourceName: g.str(),
			DeviceIDs: g.numa(), AllocResp: g.bytes(),
		}
	}
	return d
}

func (g *gen) v1() *v1.Data {
	registered := g.registered()
	switch g.n(6) {
	case 0:
		return v1Data(nil, registered)
	case 1:
		return v1Data([]v1.PodDevicesEntry{}, registered)
	}
	entries := make([]v1.PodDevicesEntry, g.n(5)+1)
	for i := range entries {
		entries[i] = v1.PodDevicesEntry{
			PodUID: g.str(), ContainerName: g.str(), ResourceName: g.str(),
			DeviceIDs: g.strs(), AllocResp: g.bytes(),
		}
	}
	return v1Data(entries, registered)
}

// TestHashTextEdgeCases: the shapes that print differently in go-spew, one
// by one.
func TestHashTextEdgeCases(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	manyNUMA := DevicesPerNUMA{}
	for _, n := range edgeInts {
		manyNUMA[n] = []string{fmt.Sprint(n)}
	}
	manyRegistered := map[string][]string{}
	for i, s := range edgeStrings {
		manyRegistered[s] = edgeStrings[i:min(len(edgeStrings), i+2)]
	}
	entry := func(ids DevicesPerNUMA, resp []byte) []PodDevicesEntry {
		return []PodDevicesEntry{{PodUID: "pod", ContainerName: "c", ResourceName: "r", DeviceIDs: ids, AllocResp: resp}}
	}
	tests := map[string]checkpointData{
		"zero value":                {},
		"nil entries, empty map":    {RegisteredDevices: map[string][]string{}},
		"empty entries, nil map":    {PodDeviceEntries: []PodDevicesEntry{}},
		"zero entry":                {PodDeviceEntries: []PodDevicesEntry{{}}},
		"two zero entries":          {PodDeviceEntries: []PodDevicesEntry{{}, {}}},
		"empty NUMA map":            {PodDeviceEntries: entry(DevicesPerNUMA{}, []byte{})},
		"nil and empty device list": {PodDeviceEntries: entry(DevicesPerNUMA{0: nil, 1: {}}, nil)},
		"NUMA keys sort as numbers": {PodDeviceEntries: entry(manyNUMA, nil)},
		"every byte value":          {PodDeviceEntries: entry(nil, all)},
		"17 bytes":                  {PodDeviceEntries: entry(nil, all[:17])},
		"32 zero bytes":             {PodDeviceEntries: entry(nil, make([]byte, 32))},
		"strings as they are":       {PodDeviceEntries: []PodDevicesEntry{{PodUID: `"quoted"`, ContainerName: `back\slash`, ResourceName: "\xff\xfe\n"}}},
		"registered keys sorted":    {RegisteredDevices: manyRegistered},
		"registered nil and empty":  {RegisteredDevices: map[string][]string{"a": nil, "b": {}, "": {""}}},
		"key prefixes and case":     {RegisteredDevices: map[string][]string{"ab": {"1"}, "a": {"2"}, "B": {"3"}, "a/b": {"4"}, "é": {"5"}, "e": {"6"}}},
	}
	for name, d := range tests {
		t.Run(name, func(t *testing.T) {
			assertSpewV2(t, d)
			var old []v1.PodDevicesEntry
			if d.PodDeviceEntries != nil {
				old = []v1.PodDevicesEntry{}
			}
			for _, e := range d.PodDeviceEntries {
				var ids []string
				if e.DeviceIDs != nil {
					ids = []string{}
				}
				for _, s := range e.DeviceIDs {
					ids = append(ids, s...)
				}
				old = append(old, v1.PodDevicesEntry{PodUID: e.PodUID, ContainerName: e.ContainerName,
					ResourceName: e.ResourceName, DeviceIDs: ids, AllocResp: e.AllocResp})
			}
			assertSpewV1(t, v1Data(old, d.RegisteredDevices))
		})
	}
}

// TestHashTextRandom compares the printers with go-spew on seeded random
// values, and go-spew with k8s.io/utils/dump.ForHash, through which newer
// kubelets print: the text must be one and the same for all three.
func TestHashTextRandom(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		stream := make([]byte, rng.IntN(2048))
		for j := range stream {
			stream[j] = byte(rng.Uint32())
		}
		g := &gen{b: stream}
		d := g.v2()
		old := g.v1()
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			assertSpewV2(t, d)
			assertSpewV1(t, old)
			if i%10 == 0 {
				if a, b := spewText(d), dump.ForHash(d); a != b {
					t.Fatalf("go-spew and dump.ForHash differ %s", diffAt(a, b))
				}
			}
		})
	}
}

// TestHashTextBenchData: the benchmark's checkpoint, with realistic
// allocation responses, hashes as go-spew hashes it.
func TestHashTextBenchData(t *testing.T) {
	entries, registered, err := benchCheckpoint(1000)
	if err != nil {
		t.Fatal(err)
	}
	assertSpewV2(t, checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered})
}

func FuzzChecksumMatchesSpew(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 3, 2, 9, 200, 7, 4, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte(strings.Repeat("\x02\x05\x07\x03\xc8\x10", 40)))
	f.Fuzz(func(t *testing.T, b []byte) {
		g := &gen{b: b}
		assertSpewV2(t, g.v2())
		assertSpewV1(t, (&gen{b: b}).v1())
	})
}

// BenchmarkChecksum1000 is the checksum alone, of the benchmark's
// checkpoint.
func BenchmarkChecksum1000(b *testing.B) {
	entries, registered, err := benchCheckpoint(1000)
	if err != nil {
		b.Fatal(err)
	}
	d := checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered}
	b.SetBytes(int64(len(checksum.Text(d.print))))
	b.ReportAllocs()
	for b.Loop() {
		d.sum()
	}
}

// TestEncodeMatchesMarshal: what Encode writes, checksum included, is what
// it would write with go-spew computing the checksum.
func TestEncodeMatchesMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 1000 {
		stream := make([]byte, rng.IntN(2048))
		for j := range stream {
			stream[j] = byte(rng.Uint32())
		}
		d := (&gen{b: stream, validUTF8: true}).v2()
		got, err := Encode(d.PodDeviceEntries, d.RegisteredDevices)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if d.RegisteredDevices == nil {
			d.RegisteredDevices = map[string][]string{}
		}
		want, err := json.Marshal(data{Data: d, Checksum: fnv32a(spewText(d))})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: Encode differs from json.Marshal %s", i, diffAt(string(got), string(want)))
		}
	}
}
