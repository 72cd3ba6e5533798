package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/atomicfile"
	"github.com/berth-dev/berth/internal/quarantine"
)

// terminalExt names the files of a TerminalStore; quarantined files get
// quarantine's ".corrupt-<time>" after it.
const terminalExt = ".json"

// TerminalStore remembers, on disk, the pods berth stopped for good while
// they were still wanted (evicted or preempted), so that a restarted berth
// shows them Failed instead of starting them again. In a cluster the API
// server keeps that status; a standalone node must keep it itself.
type TerminalStore struct {
	dir string

	mu       sync.Mutex
	statuses map[types.UID]v1.PodStatus
}

// terminalRecord is one file of the store.
type terminalRecord struct {
	UID    types.UID    `json:"uid"`
	Status v1.PodStatus `json:"status"`
}

// OpenTerminalStore reads every record in dir (creating it if needed). A
// record that cannot be trusted (undecodable, for another UID, not Failed,
// not a regular file) is moved aside and reported in the returned list of
// problems; it never stops the others from loading. So is anything but a
// directory in dir's place.
func OpenTerminalStore(dir string, now time.Time) (*TerminalStore, []error, error) {
	var problems []error
	moved, err := quarantine.MkdirAll(dir, 0o700, now)
	if err != nil {
		return nil, nil, fmt.Errorf("terminal pod store: %w", err)
	}
	if moved != "" {
		problems = append(problems, fmt.Errorf("%s: not a directory; moved to %s", dir, moved))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("terminal pod store: %w", err)
	}
	s := &TerminalStore{dir: dir, statuses: map[types.UID]v1.PodStatus{}}
	for _, e := range entries {
		name := e.Name()
		// Whatever is named <uid>.json is a record, or must be moved out
		// of a record's way; atomicfile's temporary files start with a dot.
		if !strings.HasSuffix(name, terminalExt) || strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		uid := types.UID(strings.TrimSuffix(name, terminalExt))
		st, err := readTerminalRecord(path, uid)
		if err == nil {
			s.statuses[uid] = st
			continue
		}
		if to, qerr := quarantine.Move(path, now); qerr != nil {
			err = errors.Join(err, fmt.Errorf("quarantine: %w", qerr))
		} else {
			err = fmt.Errorf("%w; moved to %s", err, to)
		}
		problems = append(problems, err)
	}
	return s, problems, nil
}

func readTerminalRecord(path string, uid types.UID) (v1.PodStatus, error) {
	data, err := quarantine.ReadFile(path)
	if err != nil {
		return v1.PodStatus{}, err // it names the path
	}
	var rec terminalRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return v1.PodStatus{}, fmt.Errorf("%s: not a terminal pod record: %w", path, err)
	}
	switch {
	case rec.UID != uid:
		return v1.PodStatus{}, fmt.Errorf("%s: uid: %q does not match the file name", path, rec.UID)
	case rec.Status.Phase != v1.PodFailed:
		return v1.PodStatus{}, fmt.Errorf("%s: status.phase: %q: a stopped pod is Failed", path, rec.Status.Phase)
	}
	return rec.Status, nil
}

// Get returns the terminal status recorded for uid.
func (s *TerminalStore) Get(uid types.UID) (v1.PodStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.statuses[uid]
	return *st.DeepCopy(), ok
}

// Put records st for uid durably before it returns.
func (s *TerminalStore) Put(uid types.UID, st v1.PodStatus) error {
	if st.Phase != v1.PodFailed {
		return fmt.Errorf("terminal pod store: pod %s: phase %q is not Failed", uid, st.Phase)
	}
	data, err := json.Marshal(terminalRecord{UID: uid, Status: st})
	if err != nil {
		return fmt.Errorf("terminal pod store: pod %s: %w", uid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := atomicfile.Write(s.path(uid), data, 0o600); err != nil {
		return fmt.Errorf("terminal pod store: pod %s: %w", uid, err)
	}
	s.statuses[uid] = *st.DeepCopy()
	return nil
}

// Delete forgets uid: the pod itself is gone.
func (s *TerminalStore) Delete(uid types.UID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.statuses[uid]; !ok {
		return nil
	}
	if err := os.Remove(s.path(uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("terminal pod store: pod %s: %w", uid, err)
	}
	delete(s.statuses, uid)
	return nil
}

// Prune forgets every pod keep does not want (deleted while berth was
// down) and returns their UIDs.
func (s *TerminalStore) Prune(keep func(types.UID) bool) ([]types.UID, error) {
	s.mu.Lock()
	var gone []types.UID
	for uid := range s.statuses {
		if !keep(uid) {
			gone = append(gone, uid)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, uid := range gone {
		errs = append(errs, s.Delete(uid))
	}
	return gone, errors.Join(errs...)
}

func (s *TerminalStore) path(uid types.UID) string {
	// UIDs come from berth (UUIDs and hashes); a separator in one would be
	// a bug, and must not reach outside the directory.
	return filepath.Join(s.dir, strings.ReplaceAll(string(uid), string(filepath.Separator), "_")+terminalExt)
}
