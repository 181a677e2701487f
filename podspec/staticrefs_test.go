package podspec

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Static pods may not reference API objects (Kubernetes v1.37): the
// resource named is upstream's HasAPIObjectReference's, in its order.
func TestStaticPodAPIReference(t *testing.T) {
	ref := func(n string) v1.LocalObjectReference { return v1.LocalObjectReference{Name: n} }
	vol := func(s v1.VolumeSource) []v1.Volume { return []v1.Volume{{Name: "v", VolumeSource: s}} }
	tests := []struct {
		name    string
		spec    v1.PodSpec
		want    string
		wantErr string
	}{
		{name: "plain", spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Env: []v1.EnvVar{{Name: "A", Value: "b"}}}},
			Volumes: []v1.Volume{{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}},
				{Name: "d", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{DownwardAPI: &v1.DownwardAPIProjection{}}}}}}}}},
		{name: "service account", spec: v1.PodSpec{ServiceAccountName: "default"}, want: "serviceaccounts"},
		{name: "image pull secret", spec: v1.PodSpec{ImagePullSecrets: []v1.LocalObjectReference{ref("pull")}}, want: "secrets"},
		{name: "empty image pull secret name", spec: v1.PodSpec{ImagePullSecrets: []v1.LocalObjectReference{ref("")}}},
		{name: "env secretKeyRef", spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i", Env: []v1.EnvVar{{Name: "X",
			ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref("s"), Key: "k"}}}}}}}, want: "secrets"},
		{name: "envFrom secret", spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: ref("s")}}}}}}, want: "secrets"},
		{name: "secret volume", spec: v1.PodSpec{Volumes: vol(v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}})}, want: "secrets"},
		{name: "env configMapKeyRef", spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Env: []v1.EnvVar{{Name: "X",
			ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("cm"), Key: "k"}}}}}}}, want: "configmaps"},
		{name: "ephemeral container envFrom configmap", spec: v1.PodSpec{EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "e",
			EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref("cm")}}}}}}}, want: "configmaps"},
		{name: "configmap volume", spec: v1.PodSpec{Volumes: vol(v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("cm")}})}, want: "configmaps"},
		{name: "secret before configmap", spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "a", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("cm")}}},
			{Name: "b", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}}}}, want: "secrets"},
		{name: "resource claims", spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "gpu"}}}, want: "resourceclaims"},
		{name: "pvc", spec: v1.PodSpec{Volumes: vol(v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "p"}})}, want: "persistentvolumeclaims"},
		{name: "ephemeral volume", spec: v1.PodSpec{Volumes: vol(v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}})}, want: "persistentvolumeclaims (via ephemeral volumes)"},
		{name: "csi", spec: v1.PodSpec{Volumes: vol(v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d"}})}, want: "csidrivers (via CSI volumes)"},
		{name: "csi with a secret", spec: v1.PodSpec{Volumes: vol(v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &v1.LocalObjectReference{Name: "s"}}})}, want: "secrets"},
		{name: "projected token", spec: v1.PodSpec{Volumes: vol(v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "t"}}}}})}, want: "serviceaccounts (via projected volumes)"},
		{name: "cluster trust bundle", spec: v1.PodSpec{Volumes: vol(v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "b"}}}}})}, want: "clustertrustbundles"},
		{name: "pod certificate", spec: v1.PodSpec{Volumes: vol(v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{PodCertificate: &v1.PodCertificateProjection{SignerName: "x/y"}}}}})}, want: "podcertificates"},
		{name: "unknown volume type", spec: v1.PodSpec{Volumes: vol(v1.VolumeSource{})}, wantErr: `unknown volume type for volume "v"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StaticPodAPIReference(&v1.Pod{Spec: tt.spec})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
			cerr := CheckStaticPod(&v1.Pod{Spec: tt.spec})
			if tt.want == "" && cerr != nil {
				t.Fatalf("CheckStaticPod: %v", cerr)
			}
			if tt.want != "" && (cerr == nil || cerr.Error() != "static pods may not reference "+tt.want) {
				t.Fatalf("CheckStaticPod: %v", cerr)
			}
		})
	}
}

// spec.hostnameOverride as the API server checks it (v1.37 GA): a static
// pod with it and setHostnameAsFQDN or hostNetwork, or an override that
// is too long or no DNS subdomain, is refused.
func TestCheckStaticPodHostnameOverride(t *testing.T) {
	yes := true
	str := func(s string) *string { return &s }
	tests := []struct {
		name    string
		spec    v1.PodSpec
		wantErr string
	}{
		{name: "plain override", spec: v1.PodSpec{HostnameOverride: str("db-0.example")}},
		{name: "with setHostnameAsFQDN", spec: v1.PodSpec{HostnameOverride: str("h"), SetHostnameAsFQDN: &yes},
			wantErr: "spec.hostnameOverride: Forbidden: may not be specified when setHostnameAsFQDN is true"},
		{name: "with hostNetwork", spec: v1.PodSpec{HostnameOverride: str("h"), HostNetwork: true},
			wantErr: "spec.hostnameOverride: Forbidden: may not be specified when hostNetwork is true"},
		{name: "too long", spec: v1.PodSpec{HostnameOverride: str(strings.Repeat("a", 65))},
			wantErr: "spec.hostnameOverride: Too long: may not be more than 64 bytes"},
		{name: "not a subdomain", spec: v1.PodSpec{HostnameOverride: str("Not_Valid")},
			wantErr: `spec.hostnameOverride: Invalid value: "Not_Valid"`},
	}
	for _, tt := range tests {
		err := CheckStaticPod(&v1.Pod{Spec: tt.spec})
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}
