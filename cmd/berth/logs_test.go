package main

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDefaultContainer(t *testing.T) {
	tests := []struct {
		name    string
		pod     func() *v1.Pod
		want    string
		wantErr string
	}{
		{name: "only container", pod: func() *v1.Pod { return pod("app") }, want: "app"},
		{
			name: "init containers do not count",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Spec.InitContainers = []v1.Container{{Name: "setup"}}
				return p
			},
			want: "app",
		},
		{
			name: "annotation picks one",
			pod: func() *v1.Pod {
				p := pod("app", "proxy")
				p.Annotations = map[string]string{defaultContainerAnnotation: "proxy"}
				return p
			},
			want: "proxy",
		},
		{
			name: "annotation naming no container is ignored",
			pod: func() *v1.Pod {
				p := pod("app", "proxy")
				p.Annotations = map[string]string{defaultContainerAnnotation: "gone"}
				return p
			},
			wantErr: "pod default/web has 2 containers; choose one with -c: app, proxy",
		},
		{
			name: "several containers",
			pod: func() *v1.Pod {
				p := pod("app", "proxy")
				p.Spec.InitContainers = []v1.Container{{Name: "setup"}}
				return p
			},
			wantErr: "choose one with -c: app, proxy (init containers: setup)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := defaultContainer(tt.pod())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
