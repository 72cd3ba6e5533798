package kuberuntime

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// seccompDirName is the directory under the node agent's root directory
// that Localhost seccomp profiles are read from: the kubelet's
// seccompProfileRoot is filepath.Join(rootDirectory, "seccomp")
// (NewKubeGenericRuntimeManager).
const seccompDirName = "seccomp"

// SeccompProfileRoot is where Localhost seccomp profiles live for a node
// agent whose root directory is rootDir, as for the kubelet
// (<root-dir>/seccomp): the value of ContainerOptions.SeccompProfileRoot.
func SeccompProfileRoot(rootDir string) string {
	return filepath.Join(rootDir, seccompDirName)
}

// localhostProfilePath resolves a Localhost profile to the absolute path the
// runtime loads, as the kubelet's fieldSeccompProfile does (the profile
// joined to the seccomp root). field names the profile's field in errors.
// The API server refuses an absolute path or a ".." element in
// localhostProfile (validateLocalDescendingPath); a static pod or a pod
// from an older server is checked here with the same words, so that no
// profile is ever read from outside the root. An empty root is refused too:
// the profile would be resolved against the runtime's working directory.
func localhostProfilePath(root, field, profile string) (string, error) {
	fld := field + ".localhostProfile"
	if root == "" || !filepath.IsAbs(root) {
		return "", fmt.Errorf("%s: %q cannot be resolved: no absolute seccomp profile root is configured (got %q)", fld, profile, root)
	}
	if path.IsAbs(profile) {
		return "", fmt.Errorf("%s: Invalid value: %q: must be a relative path", fld, profile)
	}
	for _, elem := range strings.Split(filepath.ToSlash(profile), "/") {
		if elem == ".." {
			return "", fmt.Errorf("%s: Invalid value: %q: must not contain '..'", fld, profile)
		}
	}
	p := filepath.Join(root, profile)
	if p == filepath.Clean(root) {
		return "", fmt.Errorf("%s: Invalid value: %q: must name a file under the seccomp profile root %s", fld, profile, root)
	}
	return p, nil
}
