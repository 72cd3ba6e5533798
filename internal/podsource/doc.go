// Package podsource turns a directory of static pod manifests into the set of
// pods berth should run on this node, and watches that directory.
//
// Each manifest goes through the same steps as a kubelet static pod: strict
// decoding into a v1.Pod, the API server's v1 defaulting (SetDefaults), the
// kubelet's static pod identity (name "<name>-<node>", a UID derived from the
// file, node and content, the config.source and config.hash annotations), and
// the API server's validation of what a standalone node can honour
// (Validate). A manifest that fails any step becomes a ManifestError naming
// the file, the field and the reason; it never stops the other manifests.
package podsource
