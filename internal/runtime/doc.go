// Package runtime is berth's client of a CRI v1 runtime: every call carries a
// timeout, and the runtime's answers are translated into berth's
// runtime-neutral view of a pod (package container). The managed containerd
// that berth runs by default lives in the subpackage containerd.
package runtime
