package kuberuntime

import (
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func podUserns() *runtimeapi.UserNamespace {
	ids := func() []*runtimeapi.IDMapping {
		return []*runtimeapi.IDMapping{{HostId: 65536 * 3, ContainerId: 0, Length: 65536}}
	}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids(), Gids: ids()}
}

func TestUserNamespaceOnSandboxAndContainers(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metaWith("p", "ns", "u", nil, nil),
		Spec: v1.PodSpec{
			HostUsers:  ptr(false),
			Volumes:    []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			Containers: []v1.Container{{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
		},
	}
	tests := []struct {
		name    string
		userns  *runtimeapi.UserNamespace
		hostUsr *bool
		wantErr bool
		want    *runtimeapi.UserNamespace
	}{
		{name: "own namespace", userns: podUserns(), hostUsr: ptr(false), want: podUserns()},
		{name: "hostUsers false without mappings", hostUsr: ptr(false), wantErr: true},
		{name: "hostUsers false with the node's", hostUsr: ptr(false), wantErr: true,
			userns: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
		{name: "host users", hostUsr: ptr(true), want: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
		{name: "unset", want: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod.DeepCopy()
			p.Spec.HostUsers = tt.hostUsr
			sb, _, err := SandboxConfig(p, SandboxOptions{PodLogsDir: "/logs", UserNamespace: tt.userns}, nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("SandboxConfig error = %v, want error %v", err, tt.wantErr)
			}
			cfg, cerr := ContainerConfig(p, &p.Spec.Containers[0], ContainerOptions{
				UserNamespace: tt.userns, VolumePaths: map[string]string{"data": "/var/lib/berth/pods/u/volumes/data"}})
			if (cerr != nil) != tt.wantErr {
				t.Fatalf("ContainerConfig error = %v, want error %v", cerr, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got := sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions; !proto.Equal(got, tt.want) {
				t.Errorf("sandbox userns = %v, want %v", got, tt.want)
			}
			if got := cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions; !proto.Equal(got, tt.want) {
				t.Errorf("container userns = %v, want %v", got, tt.want)
			}
			if len(cfg.Mounts) == 0 {
				t.Fatal("no mounts to check")
			}
			for _, m := range cfg.Mounts {
				wantIDs := tt.want.Mode == runtimeapi.NamespaceMode_POD
				if (len(m.UidMappings) > 0) != wantIDs || (len(m.GidMappings) > 0) != wantIDs {
					t.Errorf("mount %s: uid mappings %v gid mappings %v, want idmapped %v", m.ContainerPath, m.UidMappings, m.GidMappings, wantIDs)
				}
				if wantIDs && (!proto.Equal(m.UidMappings[0], tt.want.Uids[0]) || !proto.Equal(m.GidMappings[0], tt.want.Gids[0])) {
					t.Errorf("mount %s: mappings %v/%v, want the pod's", m.ContainerPath, m.UidMappings, m.GidMappings)
				}
			}
		})
	}
}
