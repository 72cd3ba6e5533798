package containerd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/atomicfile"
	"github.com/berth-dev/berth/internal/quarantine"
)

// RecordName is the file, in the managed containerd's dir, naming the
// containerd berth manages: launched by it or adopted from a berth that
// died. A pid alone can be reused by another process; with the process's
// start time and the boot it ran in, the record names one process for
// ever, so that berth, or `berth reset`, never signals a stranger.
const RecordName = "managed.json"

// Identity names one process: its pid, its start time in clock ticks since
// boot (field 22 of /proc/<pid>/stat) and the boot's id.
type Identity struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	BootID    string `json:"bootID"`
}

// Names reports whether the record r names the live process live: same
// pid, same start time, same boot. A zero record names nothing.
func (r Identity) Names(live Identity) bool {
	return r.PID > 0 && r.StartTime > 0 && r.BootID != "" && r == live
}

func (r Identity) validate() error {
	switch {
	case r.PID <= 1:
		return fmt.Errorf("pid %d is not a process berth can have started", r.PID)
	case r.StartTime == 0:
		return errors.New("startTime is missing")
	case r.BootID == "":
		return errors.New("bootID is missing")
	}
	return nil
}

// ProcessIdentity reads the identity of the live process pid; an error if
// it is gone or a zombie.
func ProcessIdentity(pid int) (Identity, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return Identity{}, err
	}
	start, err := parseStartTime(string(data))
	if err != nil {
		return Identity{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return Identity{}, err
	}
	return Identity{PID: pid, StartTime: start, BootID: strings.TrimSpace(string(boot))}, nil
}

// parseStartTime reads the start time out of a /proc/<pid>/stat line. The
// command name (field 2) may hold spaces and parentheses, so the fields
// are counted after its last ")". A zombie has no identity worth keeping.
func parseStartTime(stat string) (uint64, error) {
	i := strings.LastIndex(stat, ")")
	if i < 0 {
		return 0, errors.New("no command name")
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return 0, fmt.Errorf("%d fields after the command name, want 20 or more", len(fields))
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, errors.New("the process has exited")
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("start time %q: not a positive number", fields[19])
	}
	return v, nil
}

// ReadRecord reads the record in dir (the managed containerd's dir). ok is
// false when there is none; a record that cannot be trusted is quarantined
// (renamed aside, see internal/quarantine) and reported in err, and ok is
// false too.
func ReadRecord(dir string, now time.Time) (rec Identity, ok bool, err error) {
	path := filepath.Join(dir, RecordName)
	data, err := quarantine.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Identity{}, false, nil
	}
	if err == nil {
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err = dec.Decode(&rec); err == nil {
			err = rec.validate()
		}
	}
	if err == nil {
		return rec, true, nil
	}
	err = fmt.Errorf("%s: %w", path, err)
	if to, qErr := quarantine.Move(path, now); qErr != nil {
		err = errors.Join(err, qErr)
	} else {
		err = fmt.Errorf("%w; set aside as %s", err, to)
	}
	return Identity{}, false, err
}

// writeRecord records pid as the containerd berth manages on l.
func writeRecord(l layout, pid int) (Identity, error) {
	id, err := ProcessIdentity(pid)
	if err != nil {
		return Identity{}, fmt.Errorf("record containerd (pid %d): %w", pid, err)
	}
	data, err := json.Marshal(id)
	if err != nil {
		return Identity{}, err
	}
	if err := atomicfile.Write(filepath.Join(l.Dir, RecordName), append(data, '\n'), 0o644); err != nil {
		return Identity{}, fmt.Errorf("record containerd (pid %d): %w", pid, err)
	}
	return id, nil
}

// claim makes the live containerd pid, running l's config, the one berth
// manages: a record that names it is kept; none, a corrupt one (set aside)
// or a stale one (a containerd since replaced) is rewritten. A containerd
// that runs this root's config is berth's managed containerd whoever
// launched it, and berth (an upgraded one included, whose predecessor kept
// no record) stops it at its clean shutdown as if it had launched it.
func claim(l layout, pid int, log *slog.Logger) (Identity, error) {
	rec, ok, err := ReadRecord(l.Dir, time.Now())
	if err != nil {
		log.Warn("containerd: the record of the managed containerd was unreadable", "err", err)
	}
	live, err := ProcessIdentity(pid)
	if err != nil {
		return Identity{}, fmt.Errorf("containerd (pid %d): %w", pid, err)
	}
	if ok && rec.Names(live) {
		return live, nil
	}
	if ok {
		log.Info("containerd: the record named another process; recording the running one", "recorded", rec.PID, "pid", pid)
	}
	return writeRecord(l, pid)
}
