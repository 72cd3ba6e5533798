package network

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

// confExtensions are the files containerd's CRI plugin (go-cni, libcni's
// ConfFiles) reads from its conf dir.
var confExtensions = []string{".conf", ".conflist", ".json"}

// ConfFiles returns the CNI configuration files of dir in the order
// containerd reads them (by name); a missing dir holds none.
func ConfFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CNI conf dir %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || !slices.Contains(confExtensions, filepath.Ext(e.Name())) {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	slices.Sort(out)
	return out, nil
}

// HostConfProblem says why the host's CNI configuration in confDir cannot
// give pods a network, "" when it can. containerd's CRI plugin loads only
// the first file by name (max_conf_num = 1) and, when that file is
// invalid, none at all; so does this check, which names the file, the
// field and the reason where containerd would say only "cni plugin not
// initialized". A plugin whose binary is not in binDir is reported too:
// every sandbox would fail on it.
func HostConfProblem(confDir, binDir string) string {
	files, err := ConfFiles(confDir)
	if err != nil {
		return err.Error()
	}
	if len(files) == 0 {
		return fmt.Sprintf("no CNI configuration file in %s (--cni-conf-dir)", confDir)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return fmt.Sprintf("CNI configuration %s: %v", files[0], err)
	}
	types, err := PluginTypes(data, strings.HasSuffix(files[0], ".conflist"))
	if err != nil {
		return fmt.Sprintf("CNI configuration %s: %v", files[0], err)
	}
	for _, t := range types {
		if st, err := os.Stat(filepath.Join(binDir, t)); err != nil || st.IsDir() {
			return fmt.Sprintf("CNI configuration %s: plugin %q not found in %s (--cni-bin-dir)", files[0], t, binDir)
		}
	}
	return ""
}

// PluginTypes checks one CNI configuration as libcni reads it (a conflist,
// or a single plugin's conf) and returns its plugins' types. The error
// names the field and the reason.
func PluginTypes(data []byte, list bool) ([]string, error) {
	type plugin struct {
		Type string `json:"type"`
	}
	var conf struct {
		Name    *string           `json:"name"`
		Type    string            `json:"type"`
		Plugins []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if conf.Name == nil || *conf.Name == "" {
		return nil, errors.New(`field "name": missing or empty`)
	}
	if !list {
		if conf.Type == "" {
			return nil, errors.New(`field "type": missing or empty`)
		}
		return []string{conf.Type}, nil
	}
	if len(conf.Plugins) == 0 {
		return nil, errors.New(`field "plugins": missing or empty`)
	}
	var types []string
	for i, raw := range conf.Plugins {
		var p plugin
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf(`field "plugins[%d]": %w`, i, err)
		}
		if p.Type == "" {
			return nil, fmt.Errorf(`field "plugins[%d].type": missing or empty`, i)
		}
		types = append(types, p.Type)
	}
	return types, nil
}
