package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
)

func TestContainerStatusTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	msgFile := filepath.Join(dir, "termination-log")
	if err := os.WriteFile(msgFile, []byte("disk full"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "0.log")
	var log strings.Builder
	for i := 0; i < 100; i++ {
		log.WriteString("2026-01-01T00:00:00.000000000Z stderr F line " + string(rune('a'+i%26)) + "\n")
	}
	if err := os.WriteFile(logFile, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	status := func(exit int32, hostPath, policy string) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{
			Id: "c", Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: exit, LogPath: logFile,
			Annotations: map[string]string{
				container.AnnotationTerminationMessageHostPath: hostPath,
				container.AnnotationTerminationMessagePolicy:   policy,
				container.AnnotationRestartCount:               "4",
			},
		}
	}
	tests := []struct {
		name, want string
		st         *runtimeapi.ContainerStatus
	}{
		{"the file wins", "disk full", status(1, msgFile, "FallbackToLogsOnError")},
		{"File policy with an empty file: no message", "", status(1, emptyFile, "File")},
		{"fallback to the log tail on failure", "line v\n", status(1, emptyFile, "FallbackToLogsOnError")},
		{"no fallback on success", "", status(0, emptyFile, "FallbackToLogsOnError")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := containerStatus(tt.st, "sb")
			if tt.want == "line v\n" {
				// 80 lines of the log, the last one "line v".
				if !strings.HasSuffix(got.Message, tt.want) || strings.Count(got.Message, "\n") != 80 {
					t.Fatalf("message = %q", got.Message)
				}
			} else if got.Message != tt.want {
				t.Fatalf("message = %q, want %q", got.Message, tt.want)
			}
			if got.RestartCount != 4 || got.Name != "app" || got.State != container.StateExited {
				t.Errorf("annotations not read back: %+v", got)
			}
		})
	}
}

func TestContainerStatusUser(t *testing.T) {
	tests := []struct {
		name string
		in   *runtimeapi.ContainerUser
		want *v1.ContainerUser
	}{
		{"a runtime that does not say (containerd 1.x)", nil, nil},
		{"no Linux user", &runtimeapi.ContainerUser{}, &v1.ContainerUser{}},
		{"the process' identity", &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: 1000, Gid: 3000, SupplementalGroups: []int64{3000, 4000}}},
			&v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := containerStatus(&runtimeapi.ContainerStatus{Id: "c", User: tt.in}, "sb").User
			if !apiequality.Semantic.DeepEqual(got, tt.want) {
				t.Fatalf("user = %+v, want %+v", got, tt.want)
			}
		})
	}
}
