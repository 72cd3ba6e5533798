package status

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/quarantine"
)

var storeTime = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func evictedPodStatus(msg string) v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: msg}
}

func TestTerminalStoreSurvivesReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "terminal")
	s, problems, err := OpenTerminalStore(dir, storeTime)
	if err != nil || len(problems) > 0 {
		t.Fatalf("open: %v %v", err, problems)
	}
	if err := s.Put("a", evictedPodStatus("low on disk")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("b", evictedPodStatus("low on memory")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("c", v1.PodStatus{Phase: v1.PodRunning}); err == nil {
		t.Error("a Running status was recorded as terminal")
	}
	if err := s.Delete("b"); err != nil {
		t.Fatal(err)
	}

	s2, problems, err := OpenTerminalStore(dir, storeTime)
	if err != nil || len(problems) > 0 {
		t.Fatalf("reopen: %v %v", err, problems)
	}
	if st, ok := s2.Get("a"); !ok || st.Message != "low on disk" {
		t.Errorf("a = %+v, %v after reopening", st, ok)
	}
	if _, ok := s2.Get("b"); ok {
		t.Error("b was deleted, yet came back")
	}
	gone, err := s2.Prune(func(uid types.UID) bool { return uid != "a" })
	if err != nil || !slices.Equal(gone, []types.UID{"a"}) {
		t.Errorf("prune = %v, %v", gone, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left after prune: %v", entries)
	}
}

func TestTerminalStoreQuarantinesBadRecords(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"truncated.json": `{"uid":"truncated","status":{"phase":"Fa`,
		"other.json":     `{"uid":"someone-else","status":{"phase":"Failed"}}`,
		"running.json":   `{"uid":"running","status":{"phase":"Running"}}`,
		"good.json":      `{"uid":"good","status":{"phase":"Failed","reason":"Evicted"}}`,
		"notes.txt":      "not a record",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, problems, err := OpenTerminalStore(dir, storeTime)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := s.Get("good"); !ok || st.Reason != "Evicted" {
		t.Errorf("the good record did not load: %+v", st)
	}
	if len(problems) != 3 {
		t.Fatalf("problems = %v, want 3", problems)
	}
	text := ""
	for _, p := range problems {
		text += p.Error() + "\n"
	}
	for _, want := range []string{"truncated.json: not a terminal pod record", `other.json: uid: "someone-else" does not match`,
		`running.json: status.phase: "Running"`, "moved to"} {
		if !strings.Contains(text, want) {
			t.Errorf("problems do not say %q:\n%s", want, text)
		}
	}
	for _, name := range []string{"truncated", "other", "running"} {
		if _, err := os.Stat(filepath.Join(dir, name+".json")); err == nil {
			t.Errorf("%s.json was not moved aside", name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("a file that is not a record was touched: %v", err)
	}
}

// Anything but a regular file named as a record is set aside and reported,
// never skipped without a word, and never stops the store from opening.
func TestTerminalStoreQuarantinesWrongFileTypes(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nowhere", filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	good := `{"uid":"good","status":{"phase":"Failed","reason":"Evicted"}}`
	if err := os.WriteFile(filepath.Join(dir, "good.json"), []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	s, problems, err := OpenTerminalStore(dir, storeTime)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("good"); !ok {
		t.Error("the good record did not load")
	}
	text := ""
	for _, p := range problems {
		text += p.Error() + "\n"
	}
	for _, c := range []struct{ name, kind string }{{"dir", "directory"}, {"fifo", "named pipe"}, {"link", "symbolic link"}} {
		path := filepath.Join(dir, c.name+".json")
		aside := quarantine.Name(path, storeTime, 0)
		if want := path + ": is a " + c.kind + ", not a regular file; moved to " + aside; !strings.Contains(text, want) {
			t.Errorf("problems do not say %q:\n%s", want, text)
		}
		if _, err := os.Lstat(aside); err != nil {
			t.Errorf("%s was not moved aside: %v", path, err)
		}
	}
	if len(problems) != 3 {
		t.Errorf("problems = %v, want 3", problems)
	}
}

// A file where the store's directory belongs is moved aside: the store
// opens, empty, and says so.
func TestTerminalStoreDirectoryReplacedByAFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "terminal")
	if err := os.WriteFile(dir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, problems, err := OpenTerminalStore(dir, storeTime)
	if err != nil {
		t.Fatal(err)
	}
	aside := quarantine.Name(dir, storeTime, 0)
	if len(problems) != 1 || problems[0].Error() != dir+": not a directory; moved to "+aside {
		t.Errorf("problems = %v", problems)
	}
	if err := s.Put("a", evictedPodStatus("low on disk")); err != nil {
		t.Errorf("the store does not work: %v", err)
	}
}

// A record corrupted twice at the same instant keeps both copies.
func TestTerminalStoreSecondCorruptionKeepsTheFirst(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	for i, content := range []string{"first", "second"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, problems, err := OpenTerminalStore(dir, storeTime); err != nil || len(problems) != 1 {
			t.Fatalf("open %d: %v, %v", i, problems, err)
		}
		if got, err := os.ReadFile(quarantine.Name(path, storeTime, i)); err != nil || string(got) != content {
			t.Errorf("set-aside copy %d holds %q, %v", i, got, err)
		}
	}
}
