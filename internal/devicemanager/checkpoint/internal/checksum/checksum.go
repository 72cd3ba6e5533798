// Package checksum computes the checksum the kubelet stores in its
// checkpoint files: FNV-32a over the text go-spew prints for the value.
//
// The text includes Go type names (package name and type name, e.g.
// "checkpoint.PodDevicesEntry"), so a value only hashes as the kubelet's does
// when its types are named exactly as the kubelet names them.
package checksum

import (
	"hash/fnv"

	"github.com/davecgh/go-spew/spew"
)

// printer is the kubelet's hashutil.DeepHashObject configuration. A function,
// not a package variable, because spew.ConfigState is mutable.
func printer() *spew.ConfigState {
	return &spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
}

// Of returns the checksum of v, widened to uint64 as the kubelet stores it.
func Of(v any) uint64 {
	h := fnv.New32a()
	printer().Fprintf(h, "%#v", v)
	return uint64(h.Sum32())
}

// Input returns the exact text that Of hashes, to compare against the text
// the kubelet hashed.
func Input(v any) string {
	return printer().Sprintf("%#v", v)
}
