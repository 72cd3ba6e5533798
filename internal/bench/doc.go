// Package bench is berth's performance harness: it runs berth on its own
// managed containerd, drives it through the manifest directory the way a
// user would, and measures start-up, reaction, steady-state cost and
// density against what the runtime itself takes for the same pods (the
// floor). The numbers come from the runtime's own timestamps and from
// /proc, not from berth's view of itself, so berth cannot flatter its
// figures.
//
// With a kubelet binary (CompareOptions), each scenario also runs on the
// upstream kubelet and on berth with a containerd it does not manage,
// interleaved, and the report compares the agents figure by figure; the
// scenarios see any of them as a nodeUnderTest.
//
// The pure parts (percentiles, /proc parsing, histogram quantiles, the
// report and its targets) are plain functions, tested on their own; the
// scenarios are the I/O around them.
package bench
