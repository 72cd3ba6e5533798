//go:build tools

// Package containerd2 pins the runtime berth's managed containerd can run
// instead of the host's: containerd 2 with its runc shim, and runc. Its
// go.mod and go.sum are exactly what the binaries are built from (`make
// containerd2` builds them into bin/runtime/containerd2-<hash of both>/);
// run berth on them with --containerd-binary <that dir>/containerd.
package containerd2

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/opencontainers/runc"
)
