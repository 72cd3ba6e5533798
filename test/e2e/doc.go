// Package e2e runs berth's own binaries against a real containerd, managed by
// berth, on this host. The tests need root, containerd, runc, the CNI
// plugins and busybox-static (`make test` installs them); without them the
// suite fails rather than skips.
package e2e
