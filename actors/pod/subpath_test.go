package pod

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The subPath and subPathExpr of a container's volumeMounts, as upstream's
// makeMounts: expanded with the container's environment, refused when
// absolute or stepping out with "..", a missing variable named.
func TestSubPaths(t *testing.T) {
	env := []*runtimeapi.KeyValue{{Key: "POD_NAME", Value: []byte("web-1")}, {Key: "UP", Value: []byte("..")},
		{Key: "ABS", Value: []byte("/tmp")}, {Key: "EMPTY", Value: nil}}
	tests := []struct {
		name    string
		mount   v1.VolumeMount
		want    string // host path
		wantErr string
	}{
		{name: "no subPath", mount: v1.VolumeMount{Name: "data", MountPath: "/d"}, want: "/vol/data"},
		{name: "subPath", mount: v1.VolumeMount{Name: "data", MountPath: "/d", SubPath: "a/b"}, want: "/vol/data/a/b"},
		{name: "subPathExpr", mount: v1.VolumeMount{Name: "data", MountPath: "/d", SubPathExpr: "logs/$(POD_NAME)"}, want: "/vol/data/logs/web-1"},
		{name: "expands to backsteps", mount: v1.VolumeMount{Name: "data", MountPath: "/d", SubPathExpr: "$(UP)"}, wantErr: "must not contain '..'"},
		{name: "expands to an absolute path", mount: v1.VolumeMount{Name: "data", MountPath: "/d", SubPathExpr: "$(ABS)"}, wantErr: "must not be an absolute path"},
		{name: "missing variable", mount: v1.VolumeMount{Name: "data", MountPath: "/d", SubPathExpr: "$(NOPE)/$(EMPTY)"}, wantErr: "missing value for NOPE, EMPTY"},
		{name: "absolute subPath", mount: v1.VolumeMount{Name: "data", MountPath: "/d", SubPath: "/etc"}, wantErr: "must not be an absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{tt.mount}}
			mounts, subs, err := volumeMounts(c, map[string]string{"data": "/vol/data"})
			if err == nil {
				err = resolveSubPaths(subs, env, nil)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(mounts) != 1 || mounts[0].HostPath != tt.want {
				t.Fatalf("mounts = %v, want host path %s", mounts, tt.want)
			}
		})
	}
}
