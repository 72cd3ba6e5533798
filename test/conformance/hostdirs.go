package conformance

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// draHostDirs are the host directories the DRA specs' driver pods write
// through hostPath volumes (DirectoryOrCreate): the default
// --kubelet-root-dir's plugins and plugins_registry, which berth's plugin
// watcher uses as well, and the CDI spec directory. Every node of the
// host shares them; the parent comes first, so that it is removed last.
var draHostDirs = []string{"/var/lib/kubelet", "/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry", "/var/run/cdi"}

// draEntryPrefix starts the names the DRA test drivers give their
// directories, sockets and CDI specs: the driver is named after its spec's
// namespace (dra-1706.k8s.io, dra-1706.k8s.io-reg.sock,
// dra-1706.k8s.io-<claim uid>-<request>.json).
const draEntryPrefix = "dra-"

// hostDirs is what draHostDirs held before the run, so that Stop removes
// what the run's specs left there and nothing else.
type hostDirs struct {
	before map[string]map[string]bool // dir -> its entries; nil: it did not exist
}

// snapshotHostDirs records the entries of dirs.
func snapshotHostDirs(dirs []string) (*hostDirs, error) {
	h := &hostDirs{before: map[string]map[string]bool{}}
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) {
			h.before[d] = nil
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", d, err)
		}
		names := map[string]bool{}
		for _, e := range entries {
			names[e.Name()] = true
		}
		h.before[d] = names
	}
	return h, nil
}

// remove deletes the DRA test drivers' entries that appeared in the dirs
// since the snapshot, then, deepest first, each dir that did not exist
// then and is empty now (another user's files keep it).
func (h *hostDirs) remove(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", d, err))
			continue
		}
		for _, e := range entries {
			if h.before[d][e.Name()] || !strings.HasPrefix(e.Name(), draEntryPrefix) {
				continue
			}
			if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("remove what the run left: %w", err))
			}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if h.before[d] != nil {
			continue
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) {
			errs = append(errs, fmt.Errorf("remove %s, which the run made: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
