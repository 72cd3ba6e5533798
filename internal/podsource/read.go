package podsource

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ReadDir reads every manifest in dir once, in file name order. Apart from
// reading files it is pure: the same directory gives the same Snapshot. A
// missing directory is an empty snapshot, not an error.
func ReadDir(dir, nodeName string) Snapshot {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Snapshot{}
	}
	if err != nil {
		return Snapshot{Errors: []ManifestError{fileError(dir, nodeName, err)}}
	}
	var s Snapshot
	first := map[string]string{} // namespace/name → the document that defined it
	for _, e := range entries {
		if ignored(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		info, err := os.Stat(path) // follows symlinks, as the kubelet does
		switch {
		case err != nil && e.Type()&fs.ModeSymlink != 0:
			s.Errors = append(s.Errors, fileError(path, nodeName, err))
			continue
		case err != nil:
			continue // removed since the directory was listed
		case !info.Mode().IsRegular():
			continue // the kubelet does not recurse either; pipes would block
		}
		for _, r := range readManifest(path, nodeName) {
			if r.pod == nil {
				s.Errors = append(s.Errors, r.err)
				continue
			}
			key := r.pod.Namespace + "/" + r.pod.Name
			if where, taken := first[key]; taken {
				dup := fileError(path, nodeName, duplicateError(r.pod, where))
				dup.Index, dup.Line = r.index, r.line
				dup.Namespace, dup.Name = r.pod.Namespace, r.pod.Name
				s.Errors = append(s.Errors, dup)
				continue
			}
			first[key] = location(path, r.index, r.line)
			s.Pods = append(s.Pods, r.pod)
		}
	}
	slices.SortStableFunc(s.Pods, func(a, b *v1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return s
}

// ignored reports whether a directory entry is no manifest: hidden files,
// which the kubelet skips too, and editors' backup, swap and autosave files.
func ignored(name string) bool {
	return strings.HasPrefix(name, ".") ||
		strings.HasSuffix(name, "~") ||
		strings.HasSuffix(name, ".swp") || strings.HasSuffix(name, ".swx") ||
		(strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#"))
}
