package prober

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/atomicfile"
	"github.com/berth-dev/berth/internal/quarantine"
)

// The state file remembers readiness and startup results by container ID, so
// that after a berth restart a container that was ready stays ready (and a
// started one stays started) until a probe says otherwise:
//
//	{"version":1,"containers":{"<runtime id>":{"podUID":"...","readiness":"Success","startup":"Success"}}}

const stateVersion = 1

type stateFile struct {
	Version    int                       `json:"version"`
	Containers map[string]containerState `json:"containers"`
}

type containerState struct {
	PodUID    types.UID `json:"podUID"`
	Readiness *Result   `json:"readiness,omitempty"`
	Startup   *Result   `json:"startup,omitempty"`
}

// ReasonStateCorrupt is the node event of a probe state file that could
// not be trusted.
const ReasonStateCorrupt = "ProbeStateCorrupt"

// nodeEvents is what loadState reports to: berth's recorder has node events
// as well as pod events.
type nodeEvents interface {
	NodeEvent(eventType, reason, message string)
}

// loadState creates path's directory if missing and reads the results
// saved at path. A missing file is an empty state. A file that does not decode or validate, or anything other than a
// regular file in its place (a directory, a fifo, a symlink), is never
// trusted: it is logged, reported as a node event if recorder has them,
// moved aside to path+".corrupt-<now in UTC>" for a human to look at, and
// berth starts empty (readiness then begins at Failure, as for new
// containers). The results are a cache of what the probes will find again,
// so nothing in the file is worth stopping berth for; nor is a file in the
// directory's place, which is moved aside the same way.
func loadState(path string, now time.Time, recorder EventRecorder, log *slog.Logger) (map[resultKey]cachedResult, error) {
	dir := filepath.Dir(path)
	moved, err := quarantine.MkdirAll(dir, 0o700, now)
	if err != nil {
		return nil, fmt.Errorf("probe state directory: %w", err)
	}
	if moved != "" {
		log.Error("the probe state directory was not a directory; moved aside, starting with no saved probe results",
			"path", dir, "movedTo", moved)
		reportCorrupt(recorder, fmt.Sprintf("Probe state directory %s was not a directory; moved to %s; starting with no saved probe results", dir, moved))
		return map[resultKey]cachedResult{}, nil
	}
	data, err := quarantine.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[resultKey]cachedResult{}, nil
	}
	if err != nil && !errors.Is(err, quarantine.ErrNotRegular) {
		return nil, fmt.Errorf("read probe state: %w", err)
	}
	var results map[resultKey]cachedResult
	if err == nil {
		if results, err = decodeState(data); err == nil {
			return results, nil
		}
	}
	msg := fmt.Sprintf("Probe state file %s cannot be trusted (%v); ", path, err)
	aside, qerr := quarantine.Move(path, now)
	if qerr != nil {
		log.Error("cannot move the corrupt probe state file aside", "path", path, "err", qerr)
		msg += fmt.Sprintf("it could not be moved aside (%v); starting with no saved probe results", qerr)
	} else {
		log.Error("probe state file is corrupt; moved aside, starting with no saved probe results",
			"path", path, "movedTo", aside, "err", err)
		msg += fmt.Sprintf("moved to %s; starting with no saved probe results", aside)
	}
	reportCorrupt(recorder, msg)
	return map[resultKey]cachedResult{}, nil
}

func reportCorrupt(recorder EventRecorder, msg string) {
	if r, ok := recorder.(nodeEvents); ok {
		r.NodeEvent(v1.EventTypeWarning, ReasonStateCorrupt, msg)
	}
}

func decodeState(data []byte) (map[resultKey]cachedResult, error) {
	var f stateFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode: trailing data after the state object")
	}
	if f.Version != stateVersion {
		return nil, fmt.Errorf("version: got %d, want %d", f.Version, stateVersion)
	}
	out := make(map[resultKey]cachedResult, 2*len(f.Containers))
	for id, c := range f.Containers {
		switch {
		case id == "" || strings.Contains(id, "://"):
			return nil, fmt.Errorf("containers: %q is not a bare container ID", id)
		case c.PodUID == "":
			return nil, fmt.Errorf("containers[%s].podUID: missing", id)
		case c.Readiness == nil && c.Startup == nil:
			return nil, fmt.Errorf("containers[%s]: no result", id)
		}
		if c.Readiness != nil {
			out[resultKey{Readiness, id}] = cachedResult{*c.Readiness, c.PodUID}
		}
		if c.Startup != nil {
			out[resultKey{Startup, id}] = cachedResult{*c.Startup, c.PodUID}
		}
	}
	return out, nil
}

// encodeState writes the persisted results (readiness and startup) of a
// results table.
func encodeState(results map[resultKey]cachedResult) ([]byte, error) {
	f := stateFile{Version: stateVersion, Containers: map[string]containerState{}}
	for k, c := range results {
		if !k.probeType.persisted() {
			continue
		}
		cs := f.Containers[k.containerID]
		cs.PodUID = c.podUID
		r := c.result
		if k.probeType == Readiness {
			cs.Readiness = &r
		} else {
			cs.Startup = &r
		}
		f.Containers[k.containerID] = cs
	}
	return json.Marshal(f)
}

func saveState(path string, data []byte) error {
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("save probe state: %w", err)
	}
	return nil
}

// persistRetry is how long a failed save waits before trying again.
const persistRetry = 5 * time.Second

// persist saves the state file whenever a persisted result changes. Saves
// coalesce: changes made while one is being written go into the next.
func (m *Manager) persist(ctx context.Context) {
	if m.statePath == "" {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.dirty:
		}
		for {
			err := m.flush()
			if err == nil {
				break
			}
			m.log.Error("cannot save probe state; will retry", "path", m.statePath, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-m.clk.After(persistRetry):
			}
		}
	}
}

// flush writes the state file if a persisted result changed since the last
// write.
func (m *Manager) flush() error {
	if m.statePath == "" {
		return nil
	}
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	m.mu.RLock()
	gen := m.gen
	if gen == m.saved {
		m.mu.RUnlock()
		return nil
	}
	data, err := encodeState(m.results)
	m.mu.RUnlock()
	if err != nil {
		return err
	}
	if err := saveState(m.statePath, data); err != nil {
		return err
	}
	m.saved = gen
	return nil
}
