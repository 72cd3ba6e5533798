package cnigc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

const (
	// DefaultResultsDir is where libcni caches the result of every
	// attachment, as <network>-<container ID>-<interface>. containerd's CRI
	// plugin does not let the dir be moved, so the managed containerd
	// writes there, outside berth's root dir.
	DefaultResultsDir = "/var/lib/cni/results"
	// LoopbackNetwork is the network name containerd's CRI plugin gives
	// the loopback attachment of every sandbox.
	LoopbackNetwork = "cni-loopback"
)

// Results reads and removes libcni's cached results of one network.
type Results interface {
	// Owned returns the container IDs with a cached attachment of the
	// network. An unreadable entry is skipped and named in the error.
	Owned() ([]string, error)
	// Files returns the cache files of id, of any network (its loopback's
	// too).
	Files(id string) []string
	// NetNS returns the network namespaces (named, by path) that id's
	// cached results name and that still exist.
	NetNS(id string) []string
	// Remove deletes files; one already gone is no error.
	Remove(files []string) error
}

// netnsDirs are where containerd's CRI plugin names the sandboxes' network
// namespaces (cni-<uuid>): the only paths the collector may remove.
var netnsDirs = []string{"/var/run/netns", "/run/netns"}

// ResultCache is libcni's result cache in Dir, read for the attachments of
// Network whose host-local IPAM stored its leases in IPAMDir. Other berths
// on the host (the end-to-end tests run many) use the same network name
// with IPAM dirs under their own root dirs, so the dir, written in the
// cached config, is what makes an attachment this node's.
type ResultCache struct {
	Dir, Network, IPAMDir string
	// NetNSDirs are the dirs a namespace NetNS returns may be in;
	// containerd's (/var/run/netns, /run/netns) when empty.
	NetNSDirs []string
}

// Owned implements Results.
func (c ResultCache) Owned() ([]string, error) {
	entries, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CNI result cache: %w", err)
	}
	var ids []string
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), c.Network+"-") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(c.Dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted by a CNI DEL meanwhile
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("CNI result cache: %w", err))
			continue
		}
		entry, err := ParseCachedResult(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("CNI result cache %s: %w", e.Name(), err))
			continue
		}
		if entry.Network == c.Network && entry.Uses(c.IPAMDir) {
			ids = append(ids, entry.ContainerID)
		}
	}
	return ids, errors.Join(errs...)
}

// Files implements Results. Container IDs are hex digits, so the patterns
// match no other container's files.
func (c ResultCache) Files(id string) []string {
	var out []string
	for _, network := range []string{c.Network, LoopbackNetwork} {
		found, _ := filepath.Glob(filepath.Join(c.Dir, network+"-"+id+"-*"))
		out = append(out, found...)
	}
	return out
}

// NetNS implements Results. A namespace counts only if it lies in one of
// the netns dirs and is named as containerd names a sandbox's (cni-...):
// a cache entry, which anyone root can write, never makes the collector
// remove another path.
func (c ResultCache) NetNS(id string) []string {
	dirs := c.NetNSDirs
	if len(dirs) == 0 {
		dirs = netnsDirs
	}
	var out []string
	for _, f := range c.Files(id) {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		r, err := ParseCachedResult(data)
		if err != nil || r.ContainerID != id {
			continue
		}
		for _, ns := range r.NetNS {
			ns = filepath.Clean(ns)
			if !slices.Contains(dirs, filepath.Dir(ns)) || !strings.HasPrefix(filepath.Base(ns), "cni-") || slices.Contains(out, ns) {
				continue
			}
			if _, err := os.Lstat(ns); err == nil {
				out = append(out, ns)
			}
		}
	}
	return out
}

// Remove implements Results.
func (c ResultCache) Remove(files []string) error {
	var errs []error
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove CNI result cache: %w", err))
		}
	}
	return errors.Join(errs...)
}

// CachedResult is what berth reads of one libcni cache file.
type CachedResult struct {
	ContainerID string
	Network     string
	// IPAMDirs are the host-local data dirs of the attachment's plugins.
	IPAMDirs []string
	// NetNS are the network namespaces the result's interfaces are in.
	NetNS []string
}

// Uses reports whether the attachment's IPAM stored its leases in dir.
func (r CachedResult) Uses(dir string) bool {
	for _, d := range r.IPAMDirs {
		if filepath.Clean(d) == filepath.Clean(dir) {
			return true
		}
	}
	return false
}

// ParseCachedResult reads a libcni cache file (kind cniCacheV1): the
// container, the network and, from the network config it embeds (a
// conflist or a single plugin's conf), each plugin's IPAM data dir.
func ParseCachedResult(data []byte) (CachedResult, error) {
	var file struct {
		Kind        string `json:"kind"`
		ContainerID string `json:"containerId"`
		Network     string `json:"networkName"`
		Config      []byte `json:"config"` // base64 in the file
		Result      struct {
			Interfaces []struct {
				Sandbox string `json:"sandbox"`
			} `json:"interfaces"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return CachedResult{}, err
	}
	if file.Kind != "cniCacheV1" || file.ContainerID == "" {
		return CachedResult{}, fmt.Errorf("not a libcni cache entry (kind %q, container %q)", file.Kind, file.ContainerID)
	}
	type plugin struct {
		IPAM struct {
			DataDir string `json:"dataDir"`
		} `json:"ipam"`
	}
	var config struct {
		plugin
		Plugins []plugin `json:"plugins"`
	}
	if err := json.Unmarshal(file.Config, &config); err != nil {
		return CachedResult{}, fmt.Errorf("its network config: %w", err)
	}
	r := CachedResult{ContainerID: file.ContainerID, Network: file.Network}
	for _, i := range file.Result.Interfaces {
		if i.Sandbox != "" && !slices.Contains(r.NetNS, i.Sandbox) {
			r.NetNS = append(r.NetNS, i.Sandbox)
		}
	}
	for _, p := range append(config.Plugins, config.plugin) {
		if p.IPAM.DataDir != "" {
			r.IPAMDirs = append(r.IPAMDirs, p.IPAM.DataDir)
		}
	}
	return r, nil
}

// RemoveOwned removes the cached results of every attachment Owned
// returns, with their loopbacks' and the network namespaces they name, and
// returns how many files went. It is for a node's root dir that is being
// removed as a whole (the test harnesses' clean-up), where no sandbox of
// it can live on.
func (c ResultCache) RemoveOwned() (int, error) {
	ids, err := c.Owned()
	errs := []error{err}
	var files []string
	for _, id := range ids {
		for _, ns := range c.NetNS(id) {
			errs = append(errs, RemoveNetNS(ns))
		}
		files = append(files, c.Files(id)...)
	}
	return len(files), errors.Join(append(errs, c.Remove(files))...)
}
