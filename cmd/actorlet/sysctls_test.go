package main

import (
	"log/slog"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAllowedUnsafeSysctls(t *testing.T) {
	pod := func(sysctl string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: sysctl, Value: "1"}}}}}
	}
	tests := []struct {
		name    string
		file    string // KubeletConfiguration body after the header; "" none
		args    []string
		want    []string
		allowed string // a sysctl then admitted
		refused string // and one refused
	}{
		{name: "none: only the safe ones", want: nil, allowed: "kernel.shm_rmid_forced", refused: "kernel.msgmax"},
		{name: "the flag", args: []string{"--allowed-unsafe-sysctls", "kernel.msg*,net.core.somaxconn"},
			want: []string{"kernel.msg*", "net.core.somaxconn"}, allowed: "kernel.msgmax", refused: "kernel.sem"},
		{name: "the config file", file: "allowedUnsafeSysctls: [kernel.sem]\n",
			want: []string{"kernel.sem"}, allowed: "kernel.sem", refused: "kernel.msgmax"},
		{name: "the flag beats the file", file: "allowedUnsafeSysctls: [kernel.sem]\n", args: []string{"--allowed-unsafe-sysctls", "kernel.msgmax"},
			want: []string{"kernel.msgmax"}, allowed: "kernel.msgmax", refused: "kernel.sem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, err := loadConfig(t, writeConfig(t, configHeader+tt.file), tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(o.AllowedUnsafeSysctls, tt.want) {
				t.Errorf("allowed unsafe sysctls %q, want %q", o.AllowedUnsafeSysctls, tt.want)
			}
			w := sysctlAllowlist(o, slog.New(slog.DiscardHandler))
			if reason, msg := w.Admit(pod(tt.allowed)); reason != "" {
				t.Errorf("%s refused: %s", tt.allowed, msg)
			}
			if reason, _ := w.Admit(pod(tt.refused)); reason != "SysctlForbidden" {
				t.Errorf("%s admitted, want SysctlForbidden", tt.refused)
			}
		})
	}
}

func TestBadAllowedUnsafeSysctlsExitTwo(t *testing.T) {
	for _, arg := range []string{"kernel.panic", "Not_A.Sysctl"} {
		t.Run(arg, func(t *testing.T) {
			if code := run([]string{"--allowed-unsafe-sysctls", arg}); code != exitUsage {
				t.Fatalf("run = %d, want %d (a sysctl that is not namespaced or not valid)", code, exitUsage)
			}
		})
	}
}
