package checksum

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/davecgh/go-spew/spew"
)

// spewText is the oracle, go-spew configured as the kubelet configures it.
// At the top level spew prints the value's type, which the Printer methods
// leave to their caller, so each case prints that type itself.
func spewText(v any) string {
	cs := spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
	return cs.Sprintf("%#v", v)
}

func fnv32a(s string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return uint64(h.Sum32())
}

// check holds one printed value to go-spew: the captured text, and the sum,
// which is computed without capturing (the path the checkpoints take).
func check(t *testing.T, v any, typ string, print func(*Printer)) {
	t.Helper()
	want := spewText(v)
	all := func(p *Printer) {
		p.WriteString(typ)
		print(p)
	}
	if got := Text(all); got != want {
		t.Fatalf("text %q, go-spew's %q", got, want)
	}
	if got, want := Sum(all), fnv32a(want); got != want {
		t.Fatalf("sum %d, FNV-32a of go-spew's text %d", got, want)
	}
}

func TestBytes(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	cases := [][]byte{nil, {}, {0}, {9}, {10}, {99}, {100}, {255}, all}
	for n := range 70 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		cases = append(cases, b)
	}
	for _, b := range cases {
		check(t, b, "([]uint8)", func(p *Printer) { p.Bytes(b) })
	}
}

func TestInt(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 9, 10, -10, 1 << 40, math.MaxInt64, math.MinInt64} {
		check(t, v, "(int64)", func(p *Printer) { p.Int(v) })
	}
}

func TestStrings(t *testing.T) {
	for _, ss := range [][]string{nil, {}, {""}, {"", ""}, {"a b", `"q"`, "\x00\xff", "é", "[x]"}} {
		check(t, ss, "([]string)", func(p *Printer) { p.Strings(ss) })
	}
}

func TestInt64Strings(t *testing.T) {
	for _, m := range []map[int64][]string{
		nil, {}, {0: nil}, {1: {}},
		{10: {"a"}, -1: {"b"}, 2: {"c"}, 0: {"d"}, math.MinInt64: {"e"}, math.MaxInt64: {"f"}, -10: {"g"}},
	} {
		check(t, m, "(map[int64][]string)", func(p *Printer) { p.Int64Strings(m) })
	}
}

func TestStringStrings(t *testing.T) {
	for _, m := range []map[string][]string{
		nil, {}, {"": nil}, {"a": {}},
		{"b": {"1"}, "a": {"2"}, "B": {"3"}, "ab": {"4"}, "a/b": {"5"}, "é": {"6"}, "e": {"7"}, "\xff": {"8"}, " ": {"9"}},
	} {
		check(t, m, "(map[string][]string)", func(p *Printer) { p.StringStrings(m) })
	}
}

// TestScratchReuse: a second map printed by the same Printer must not see
// the first one's keys.
func TestScratchReuse(t *testing.T) {
	a := map[string][]string{"x": {"1"}, "y": {"2"}, "z": {"3"}}
	b := map[string][]string{"w": {"4"}}
	m := map[int64][]string{3: {"a"}, 1: {"b"}}
	n := map[int64][]string{2: {"c"}}
	v := []any{a, b, m, n}
	check(t, v, "([]interface {})", func(p *Printer) {
		p.WriteString("[(map[string][]string)")
		p.StringStrings(a)
		p.WriteString(" (map[string][]string)")
		p.StringStrings(b)
		p.WriteString(" (map[int64][]string)")
		p.Int64Strings(m)
		p.WriteString(" (map[int64][]string)")
		p.Int64Strings(n)
		p.WriteString("]")
	})
}
