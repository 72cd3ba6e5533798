package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// state is what the driver knows, all of it on disk so that a restart
// forgets nothing: <dir>/volumes/<id> is a volume's data, and
// <dir>/meta/<id>.json what CreateVolume was asked for. A volume exists
// while its data directory does.
type state struct {
	dir string
}

// volumeMeta is a volume's record.
type volumeMeta struct {
	Name          string `json:"name"`
	CapacityBytes int64  `json:"capacityBytes"`
	// Ephemeral volumes are made by NodePublishVolume for one pod and
	// deleted by its NodeUnpublishVolume.
	Ephemeral bool `json:"ephemeral,omitempty"`
}

func openState(dir string) (*state, error) {
	s := &state{dir: dir}
	for _, d := range []string{s.volumesDir(), s.metaDir()} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
	}
	return s, nil
}

func (s *state) volumesDir() string { return filepath.Join(s.dir, "volumes") }
func (s *state) metaDir() string    { return filepath.Join(s.dir, "meta") }

// path is where the data of volume id lives.
func (s *state) path(id string) string { return filepath.Join(s.volumesDir(), id) }

func (s *state) metaPath(id string) string { return filepath.Join(s.metaDir(), id+".json") }

// check says whether the state directory is still usable.
func (s *state) check() error {
	for _, d := range []string{s.volumesDir(), s.metaDir()} {
		if fi, err := os.Stat(d); err != nil {
			return err
		} else if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", d)
		}
	}
	return nil
}

// volumeID is the ID of the volume CreateVolume names name: the same name
// always gives the same ID, which makes CreateVolume idempotent without an
// index, and the ID is safe as a file name whatever the name holds.
func volumeID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "hp-" + hex.EncodeToString(sum[:12])
}

// checkID refuses an ID that is not one file name: the IDs the node
// passes for inline ephemeral volumes are the kubelet's, not ours.
func checkID(field, id string) error {
	if id == "" {
		return status.Errorf(codes.InvalidArgument, "%s: required", field)
	}
	if strings.ContainsAny(id, "/\x00") || id == "." || id == ".." || strings.HasPrefix(id, ".") {
		return status.Errorf(codes.InvalidArgument, "%s %q: not a volume ID of this driver", field, id)
	}
	return nil
}

// get returns volume id's record, NotFound if there is no such volume.
func (s *state) get(id string) (*volumeMeta, error) {
	if fi, err := os.Stat(s.path(id)); errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume %q: not found", id)
	} else if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %q: %v", id, err)
	} else if !fi.IsDir() {
		return nil, status.Errorf(codes.Internal, "volume %q: %s is not a directory", id, s.path(id))
	}
	data, err := os.ReadFile(s.metaPath(id))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %q: its record: %v", id, err)
	}
	var m volumeMeta
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %q: its record %s: %v", id, s.metaPath(id), err)
	}
	return &m, nil
}

// create records volume id and makes its directory. The record is written
// first, whole (renamed into place): a volume whose directory exists
// always has one.
func (s *state) create(id string, m volumeMeta) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := s.metaPath(id) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o640); err != nil {
		return fmt.Errorf("record volume %s: %w", id, err)
	}
	if err := os.Rename(tmp, s.metaPath(id)); err != nil {
		return fmt.Errorf("record volume %s: %w", id, err)
	}
	if err := os.Mkdir(s.path(id), 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create volume %s: %w", id, err)
	}
	// Writable by any pod's user, as upstream's host path volumes are
	// (Mkdir's mode is cut by the umask); fsGroup can narrow it.
	if err := os.Chmod(s.path(id), 0o777); err != nil {
		return fmt.Errorf("create volume %s: %w", id, err)
	}
	return nil
}

// remove deletes volume id's data and then its record; a volume that is
// not there is no error.
func (s *state) remove(id string) error {
	if err := os.RemoveAll(s.path(id)); err != nil {
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	if err := os.Remove(s.metaPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete the record of volume %s: %w", id, err)
	}
	return nil
}
