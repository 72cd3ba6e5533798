package dra

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-dev/berth/internal/atomicfile"
)

// CheckpointFile is the name of the checkpoint in the manager's directory.
// The kubelet's is dra_manager_state; berth's format is its own (it
// records whether a claim is prepared, which the kubelet forgets on a
// restart and so prepares every claim again), hence another name.
const CheckpointFile = "berth_dra_state"

const checkpointVersion = 1

// checkpointFile is the file's JSON. Checksum is the SHA-256 of the JSON
// of Claims as written.
type checkpointFile struct {
	Version  int             `json:"version"`
	Checksum string          `json:"checksum"`
	Claims   json.RawMessage `json:"claims"`
}

// ErrCorruptCheckpoint is wrapped by the error of a checkpoint that cannot
// be trusted.
var ErrCorruptCheckpoint = errors.New("corrupt DRA checkpoint")

// fileStore keeps State in one file, written atomically.
type fileStore struct {
	path string
}

func newFileStore(dir string) *fileStore {
	return &fileStore{path: filepath.Join(dir, CheckpointFile)}
}

// encodeState is the file's content for st: claims sorted by key so that
// the same state is the same bytes.
func encodeState(st State) ([]byte, error) {
	claims := make([]Claim, 0, len(st))
	for _, c := range st {
		claims = append(claims, c)
	}
	slices.SortFunc(claims, func(a, b Claim) int { return strings.Compare(a.key(), b.key()) })
	body, err := json.Marshal(claims)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	return json.MarshalIndent(checkpointFile{Version: checkpointVersion, Checksum: hex.EncodeToString(sum[:]), Claims: body}, "", " ")
}

// decodeState reads a file's content; its errors say what is wrong, not
// where (the caller names the file).
func decodeState(data []byte) (State, error) {
	var f checkpointFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptCheckpoint, err)
	}
	if f.Version != checkpointVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrCorruptCheckpoint, f.Version, checkpointVersion)
	}
	// The checksum covers the claims as written; MarshalIndent re-indents
	// them, so compare over the compacted bytes.
	var compact bytes.Buffer
	if err := json.Compact(&compact, f.Claims); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrCorruptCheckpoint, err)
	}
	sum := sha256.Sum256(compact.Bytes())
	if got := hex.EncodeToString(sum[:]); got != f.Checksum {
		return nil, fmt.Errorf("%w: checksum mismatch: stored %q, computed %q", ErrCorruptCheckpoint, f.Checksum, got)
	}
	var claims []Claim
	if err := json.Unmarshal(f.Claims, &claims); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrCorruptCheckpoint, err)
	}
	st := State{}
	for i, c := range claims {
		if c.Namespace == "" || c.Name == "" || c.UID == "" {
			return nil, fmt.Errorf("%w: claims[%d]: namespace, name and uid are required", ErrCorruptCheckpoint, i)
		}
		if _, dup := st[c.key()]; dup {
			return nil, fmt.Errorf("%w: claims[%d]: ResourceClaim %s recorded twice", ErrCorruptCheckpoint, i, c.key())
		}
		st[c.key()] = c
	}
	return st, nil
}

// Load reads the checkpoint; a missing file is an empty State.
func (s *fileStore) Load() (State, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read DRA checkpoint: %w", err)
	}
	st, err := decodeState(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (berth will not guess which claims are prepared: unprepare them by hand or drain the node, then remove the file)", s.path, err)
	}
	return st, nil
}

// Save replaces the checkpoint with st.
func (s *fileStore) Save(st State) error {
	data, err := encodeState(st)
	if err != nil {
		return fmt.Errorf("encode DRA checkpoint: %w", err)
	}
	if err := atomicfile.Write(s.path, data, 0o600); err != nil {
		return fmt.Errorf("write DRA checkpoint: %w", err)
	}
	return nil
}
