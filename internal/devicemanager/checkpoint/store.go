package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-dev/berth/internal/atomicfile"
	"github.com/berth-dev/berth/internal/quarantine"
)

// FileName is the checkpoint's name in the device plugin directory
// (the kubelet's /var/lib/kubelet/device-plugins).
const FileName = "kubelet_internal_checkpoint"

// Write replaces dir/FileName with b atomically, mode 0600 as the kubelet's.
func Write(dir string, b []byte) error {
	return atomicfile.Write(filepath.Join(dir, FileName), b, 0o600)
}

// Read returns the bytes of dir/FileName; a missing file gives an error that
// errors.Is(err, fs.ErrNotExist).
func Read(dir string) ([]byte, error) {
	return os.ReadFile(filepath.Join(dir, FileName))
}

// Quarantine moves a checkpoint that cannot be trusted (one that failed to
// decode, or a directory or anything else in its place) out of the way, to
// dir/FileName.corrupt-<now in UTC>, durably, and returns that path: the
// evidence is kept and the next Write starts afresh. An earlier quarantined
// file is never replaced, even at the same instant (a clock that did not
// move): the name then gets a counter.
func Quarantine(dir string, now time.Time) (string, error) {
	to, err := quarantine.Move(filepath.Join(dir, FileName), now)
	if err != nil {
		return "", fmt.Errorf("quarantine device manager checkpoint: %w", err)
	}
	return to, nil
}
