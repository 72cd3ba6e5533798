package config

import (
	"strings"
	"testing"
	"time"
)

func TestLoadContainerLogs(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    ContainerLogs
		wantErr []string
	}{
		{name: "no file: the kubelet's defaults",
			want: ContainerLogs{MaxSize: 10 << 20, MaxSizeText: "10Mi", MaxFiles: 5, MaxWorkers: 1, MonitorInterval: 10 * time.Second}},
		{name: "all four set",
			file: "containerLogMaxSize: 1Mi\ncontainerLogMaxFiles: 3\ncontainerLogMaxWorkers: 4\ncontainerLogMonitorInterval: 3s\n",
			want: ContainerLogs{MaxSize: 1 << 20, MaxSizeText: "1Mi", MaxFiles: 3, MaxWorkers: 4, MonitorInterval: 3 * time.Second}},
		{name: "a decimal size", file: "containerLogMaxSize: 500k\n",
			want: ContainerLogs{MaxSize: 500000, MaxSizeText: "500k", MaxFiles: 5, MaxWorkers: 1, MonitorInterval: 10 * time.Second}},
		{name: "a negative size turns rotation off", file: "containerLogMaxSize: \"-1\"\n",
			want: ContainerLogs{MaxSize: -1, MaxSizeText: "-1", MaxFiles: 5, MaxWorkers: 1, MonitorInterval: 10 * time.Second}},
		{name: "a size that is no quantity", file: "containerLogMaxSize: ten megs\n",
			wantErr: []string{`containerLogMaxSize: "ten megs": not a quantity`}},
		{name: "a fractional number of bytes", file: "containerLogMaxSize: 1500m\n",
			wantErr: []string{`containerLogMaxSize: "1500m": not a whole number of bytes`}},
		{name: "one file", file: "containerLogMaxFiles: 1\n",
			wantErr: []string{"containerLogMaxFiles: 1: must be greater than 1"}},
		{name: "no worker", file: "containerLogMaxWorkers: 0\n",
			wantErr: []string{"containerLogMaxWorkers: 0: must be at least 1"}},
		{name: "an interval under the kubelet's 3s", file: "containerLogMonitorInterval: 1s\n",
			wantErr: []string{"containerLogMonitorInterval: 1s: must be at least 3s"}},
		{name: "every problem at once",
			file:    "containerLogMaxFiles: 0\ncontainerLogMaxWorkers: -1\ncontainerLogMonitorInterval: 0s\n",
			wantErr: []string{"containerLogMaxFiles: 0", "containerLogMaxWorkers: -1", "containerLogMonitorInterval: 0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := ""
			if tt.file != "" {
				file = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + tt.file
			}
			cfg, err := loadWith(t, file, nil, testHost)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ContainerLogs != tt.want {
				t.Errorf("got %+v, want %+v", cfg.ContainerLogs, tt.want)
			}
			if slicesHas(cfg.Unimplemented, "containerLogMaxSize") {
				t.Errorf("containerLogMaxSize reported as not honoured")
			}
			kc := cfg.Kubelet
			if kc.ContainerLogMaxSize != tt.want.MaxSizeText || *kc.ContainerLogMaxFiles != tt.want.MaxFiles ||
				*kc.ContainerLogMaxWorkers != tt.want.MaxWorkers || kc.ContainerLogMonitorInterval.Duration != tt.want.MonitorInterval {
				t.Errorf("the effective configuration does not carry the rotation settings: %+v", kc)
			}
		})
	}
}

func slicesHas(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}
