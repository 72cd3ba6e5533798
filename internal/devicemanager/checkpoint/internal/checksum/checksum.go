// Package checksum computes the checksum the kubelet stores in its
// checkpoint files: FNV-32a over the text that go-spew prints for the value
// with the kubelet's configuration (ConfigState{Indent: " ", SortKeys: true,
// DisableMethods: true, SpewKeys: true}) and the verb %#v. Newer kubelets
// reach it through k8s.io/utils/dump.ForHash, whose two extra options are
// read by spew's Dump only, so the text, and the checksum, are the same.
//
// go-spew finds that text by reflection and allocates for every number it
// prints, and an AllocateResponse is printed one decimal number per byte:
// a checkpoint of 1,000 entries took ~24 ms to hash. A Printer lets the
// caller, who knows its types, print the same text piece by piece straight
// into the hash, with no reflection and no buffer.
//
// What the caller must know about the text: it is the one-line %#v form,
// not spew's Dump, so Indent plays no part. A value carries its type in
// parentheses, as reflect.Type.String names it ("(checkpoint.DevicesPerNUMA)"),
// except slice elements, map keys and map values, which carry none (but the
// fields of a struct inside a slice do). Struct fields are printed as
// {Name:value Name:value}. Strings are printed raw: no quotes, no escapes.
// []byte is a slice like any other: [18 29 10], decimal. Map keys are sorted
// by value, numbers as numbers and strings bytewise. A nil slice or map is
// <nil>, an empty one [] or map[]; no lengths or capacities are printed. The
// tests hold every method to go-spew, byte for byte.
package checksum

import (
	"cmp"
	"slices"
	"strconv"
)

// The FNV-32a parameters of hash/fnv, inlined: the hash is fed a few bytes
// at a time, and a call through hash.Hash for each would cost more than the
// hashing.
const (
	offset32 = 2166136261
	prime32  = 16777619
)

// Printer prints go-spew's %#v text into FNV-32a. Its zero value is not
// ready; Sum and Text make one.
type Printer struct {
	h uint32
	// capture keeps the text as well, for Text; the hot path only tests it.
	capture bool
	text    []byte
	num     [20]byte
	// Sorting scratch, reused by every map of the value.
	ints []int64
	strs []string
}

// Sum returns the checksum of what print prints, widened to uint64 as the
// kubelet stores it.
func Sum(print func(*Printer)) uint64 {
	p := Printer{h: offset32}
	print(&p)
	return uint64(p.h)
}

// Text returns the text that Sum would hash, to compare with go-spew's or
// with the text the kubelet hashed.
func Text(print func(*Printer)) string {
	p := Printer{h: offset32, capture: true}
	print(&p)
	return string(p.text)
}

// WriteString prints s as it is: the caller's punctuation, field names and
// types, and string values, which spew prints unquoted.
func (p *Printer) WriteString(s string) {
	if p.capture {
		p.text = append(p.text, s...)
	}
	h := p.h
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * prime32
	}
	p.h = h
}

func (p *Printer) write(b []byte) {
	if p.capture {
		p.text = append(p.text, b...)
	}
	h := p.h
	for _, c := range b {
		h = (h ^ uint32(c)) * prime32
	}
	p.h = h
}

// Int prints an integer in decimal, as spew prints every signed kind.
func (p *Printer) Int(v int64) {
	p.write(strconv.AppendInt(p.num[:0], v, 10))
}

// Bytes prints a []byte (spew's []uint8) without its type: [18 29 10].
func (p *Printer) Bytes(b []byte) {
	if b == nil {
		p.WriteString("<nil>")
		return
	}
	if p.capture {
		p.text = append(p.text, '[')
		for i, c := range b {
			if i > 0 {
				p.text = append(p.text, ' ')
			}
			p.text = strconv.AppendUint(p.text, uint64(c), 10)
		}
		p.text = append(p.text, ']')
	}
	// This loop is nearly all of a checkpoint's hashing: allocation
	// responses are most of its bytes, and each byte becomes up to four
	// characters. Its speed is the multiply chain's; the digits do not
	// depend on the hash, so they are worked out while a multiply is in
	// flight, and the separator is unconditional (the last byte is left out
	// of the loop) to keep a conditional move off the chain.
	h := (p.h ^ '[') * prime32
	if len(b) > 0 {
		for _, c := range b[:len(b)-1] {
			h = (decimal(h, c) ^ ' ') * prime32
		}
		h = decimal(h, b[len(b)-1])
	}
	p.h = (h ^ ']') * prime32
}

// decimal hashes c in decimal.
func decimal(h uint32, c byte) uint32 {
	if c >= 10 {
		if c >= 100 {
			h = (h ^ uint32('0'+c/100)) * prime32
		}
		h = (h ^ uint32('0'+c/10%10)) * prime32
	}
	return (h ^ uint32('0'+c%10)) * prime32
}

// Strings prints a []string without its type: [a b c].
func (p *Printer) Strings(ss []string) {
	if ss == nil {
		p.WriteString("<nil>")
		return
	}
	p.WriteString("[")
	for i, s := range ss {
		if i > 0 {
			p.WriteString(" ")
		}
		p.WriteString(s)
	}
	p.WriteString("]")
}

// Int64Strings prints a map[int64][]string, or a map type defined on it,
// without its type: map[-1:[a] 0:[b c]], keys in numeric order.
func (p *Printer) Int64Strings(m map[int64][]string) {
	printMap(p, m, &p.ints, (*Printer).Int)
}

// StringStrings prints a map[string][]string without its type:
// map[a:[x] b:[y z]], keys in bytewise order (Go's < on strings, as spew's).
func (p *Printer) StringStrings(m map[string][]string) {
	printMap(p, m, &p.strs, (*Printer).WriteString)
}

// printMap prints m with its keys sorted, as spew's SortKeys does for
// numbers and strings; keys is p's scratch for them, reused between calls,
// and printKey a method expression (a method value would allocate).
func printMap[K cmp.Ordered](p *Printer, m map[K][]string, keys *[]K, printKey func(*Printer, K)) {
	if m == nil {
		p.WriteString("<nil>")
		return
	}
	p.WriteString("map[")
	sorted := (*keys)[:0]
	for k := range m {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	*keys = sorted
	for i, k := range sorted {
		if i > 0 {
			p.WriteString(" ")
		}
		printKey(p, k)
		p.WriteString(":")
		p.Strings(m[k])
	}
	p.WriteString("]")
}
