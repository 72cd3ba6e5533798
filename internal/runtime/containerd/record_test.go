package containerd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/quarantine"
)

func TestParseStartTime(t *testing.T) {
	// 52 fields as the kernel writes them; the start time is field 22.
	rest := func(state, start string) string {
		f := make([]string, 50)
		for i := range f {
			f[i] = "0"
		}
		f[0], f[19] = state, start
		return strings.Join(f, " ")
	}
	for _, tc := range []struct {
		name, stat string
		want       uint64
		wantErr    bool
	}{
		{"plain", "123 (containerd) " + rest("S", "4567"), 4567, false},
		{"name with spaces and parentheses", "9 (a) b (c) ) " + rest("R", "88"), 88, false},
		{"zombie", "9 (containerd) " + rest("Z", "88"), 0, true},
		{"no command name", "9 containerd S 1", 0, true},
		{"too short", "9 (containerd) S 1 2", 0, true},
		{"zero start", "9 (containerd) " + rest("S", "0"), 0, true},
		{"not a number", "9 (containerd) " + rest("S", "x"), 0, true},
	} {
		got, err := parseStartTime(tc.stat)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: got %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestIdentityNames(t *testing.T) {
	live := Identity{PID: 42, StartTime: 1000, BootID: "b1"}
	for _, tc := range []struct {
		name string
		rec  Identity
		want bool
	}{
		{"same process", live, true},
		{"pid reused later", Identity{PID: 42, StartTime: 999, BootID: "b1"}, false},
		{"another boot", Identity{PID: 42, StartTime: 1000, BootID: "b0"}, false},
		{"another pid", Identity{PID: 43, StartTime: 1000, BootID: "b1"}, false},
		{"zero record", Identity{}, false},
	} {
		if got := tc.rec.Names(live); got != tc.want {
			t.Errorf("%s: Names = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (Identity{}).Names(Identity{}) {
		t.Error("a zero record names a zero process")
	}
}

func TestReadRecord(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, content string
		ok, bad       bool
	}{
		{"valid", `{"pid":42,"startTime":1000,"bootID":"b1"}`, true, false},
		{"not JSON", `{"pid":`, false, true},
		{"unknown field", `{"pid":42,"startTime":1000,"bootID":"b1","x":1}`, false, true},
		{"pid 1", `{"pid":1,"startTime":1000,"bootID":"b1"}`, false, true},
		{"no start time", `{"pid":42,"bootID":"b1"}`, false, true},
		{"no boot", `{"pid":42,"startTime":1000}`, false, true},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, RecordName)
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		rec, ok, err := ReadRecord(dir, now)
		if ok != tc.ok || (err != nil) != tc.bad {
			t.Errorf("%s: ok %v err %v, want ok %v bad %v", tc.name, ok, err, tc.ok, tc.bad)
		}
		if ok && rec != (Identity{PID: 42, StartTime: 1000, BootID: "b1"}) {
			t.Errorf("%s: record %+v", tc.name, rec)
		}
		_, statErr := os.Stat(path)
		aside, _ := filepath.Glob(path + quarantine.Infix + "*")
		if tc.bad && (statErr == nil || len(aside) != 1) {
			t.Errorf("%s: a bad record must be set aside: stat %v, aside %v", tc.name, statErr, aside)
		}
		if !tc.bad && len(aside) != 0 {
			t.Errorf("%s: a good record was set aside", tc.name)
		}
	}
	if _, ok, err := ReadRecord(t.TempDir(), now); ok || err != nil {
		t.Errorf("no record: ok %v err %v", ok, err)
	}
	// A directory where the record belongs is set aside too.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, RecordName), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ReadRecord(dir, now); ok || err == nil {
		t.Errorf("a directory as record: ok %v err %v", ok, err)
	}
}

func TestProcessIdentityOfSelf(t *testing.T) {
	a, err := ProcessIdentity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ProcessIdentity(os.Getpid())
	if err != nil || !a.Names(b) {
		t.Fatalf("identity of this process changed: %+v %+v %v", a, b, err)
	}
}

// A corrupt record does not stop the adoption: it is set aside and the
// running containerd recorded afresh, so that Stop still stops it.
func TestAdoptionSetsAsideCorruptRecord(t *testing.T) {
	root := testRoot(t)
	first := startManaged(t, root)
	record := filepath.Join(root, "containerd", RecordName)
	if err := os.WriteFile(record, []byte(`{"pid": "garbled`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adopted, err := Start(ctx, Options{RootDir: root, Log: testLogger(t)})
	if err != nil || adopted.StartedByUs() || adopted.Pid() != first.Pid() {
		t.Fatalf("adopt with a corrupt record: %v", err)
	}
	if aside, _ := filepath.Glob(record + quarantine.Infix + "*"); len(aside) != 1 {
		t.Errorf("corrupt record set aside as %v, want one file", aside)
	}
	if rec, ok, err := ReadRecord(filepath.Dir(record), time.Now()); !ok || err != nil || rec.PID != first.Pid() {
		t.Errorf("record after adoption: %+v %v %v", rec, ok, err)
	}
	if err := adopted.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Done():
	case <-ctx.Done():
		t.Fatal("the adopted containerd still runs after Stop")
	}
}
