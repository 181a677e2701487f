package podspec

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// StaticPodAPIReference names the API objects a static pod (one from a
// manifest file, a manifest URL or the push API, never from the API
// server) refers to, as upstream's pod util HasAPIObjectReference, which
// the kubelet's file and HTTP sources apply since PreventStaticPodAPIReferences
// (GA and then removed in v1.37: it can no longer be turned off). An empty
// resource and a nil error: the pod refers to none and may run. Otherwise
// the source refuses the whole pod with StaticPodRefError(resource), the
// upstream message "static pods may not reference <resource>"; err is for a
// volume (or projected source) of a type it does not know.
//
// The order of the checks is upstream's, so that the resource named for a
// pod with several references is the one upstream names: the service
// account, then any Secret (image pull secrets, env, envFrom, volumes that
// carry a secret reference), any ConfigMap, ResourceClaims, then the
// volumes that need the API (CSI, PVCs, ephemeral, projected service
// account tokens, ClusterTrustBundles, pod certificates).
func StaticPodAPIReference(pod *v1.Pod) (resource string, err error) {
	spec := &pod.Spec
	if spec.ServiceAccountName != "" {
		return "serviceaccounts", nil
	}
	if refersTo(spec, secretNames) {
		return "secrets", nil
	}
	if refersTo(spec, configMapNames) {
		return "configmaps", nil
	}
	if len(spec.ResourceClaims) > 0 {
		return "resourceclaims", nil
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		switch {
		case v.AWSElasticBlockStore != nil, v.AzureDisk != nil, v.CephFS != nil, v.Cinder != nil,
			v.DownwardAPI != nil, v.EmptyDir != nil, v.FC != nil, v.FlexVolume != nil, v.Flocker != nil,
			v.GCEPersistentDisk != nil, v.GitRepo != nil, v.HostPath != nil, v.Image != nil, v.ISCSI != nil,
			v.NFS != nil, v.PhotonPersistentDisk != nil, v.PortworxVolume != nil, v.Quobyte != nil,
			v.RBD != nil, v.ScaleIO != nil, v.StorageOS != nil, v.VsphereVolume != nil:
			continue
		case v.ConfigMap != nil:
			return "configmaps (via configmap volumes)", nil
		case v.Secret != nil:
			return "secrets (via secret volumes)", nil
		case v.CSI != nil:
			return "csidrivers (via CSI volumes)", nil
		case v.Glusterfs != nil:
			return "endpoints (via glusterFS volumes)", nil
		case v.PersistentVolumeClaim != nil:
			return "persistentvolumeclaims", nil
		case v.Ephemeral != nil:
			return "persistentvolumeclaims (via ephemeral volumes)", nil
		case v.AzureFile != nil:
			return "secrets (via azureFile volumes)", nil
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				switch {
				case s.ConfigMap != nil:
					return "configmaps (via projected volumes)", nil
				case s.Secret != nil:
					return "secrets (via projected volumes)", nil
				case s.ServiceAccountToken != nil:
					return "serviceaccounts (via projected volumes)", nil
				case s.ClusterTrustBundle != nil:
					return "clustertrustbundles", nil
				case s.PodCertificate != nil:
					return "podcertificates", nil
				case s.DownwardAPI != nil:
					continue
				default:
					return "", fmt.Errorf("unknown source for projected volume %q", v.Name)
				}
			}
		default:
			return "", fmt.Errorf("unknown volume type for volume %q", v.Name)
		}
	}
	return "", nil
}

// StaticPodRefError is upstream's refusal of a static pod that refers to
// resource (pkg/kubelet/config tryDecodeSinglePod).
func StaticPodRefError(resource string) error {
	return fmt.Errorf("static pods may not reference %s", resource)
}

// CheckStaticPod is StaticPodAPIReference as one error, and the API
// server's checks of v1.37 fields that actorlet's manifest validation does
// not run (ValidateHostnameOverride): nil when the pod may run as a static
// pod.
func CheckStaticPod(pod *v1.Pod) error {
	if err := ValidateHostnameOverride(&pod.Spec); err != nil {
		return err
	}
	resource, err := StaticPodAPIReference(pod)
	if err != nil {
		return err
	}
	if resource != "" {
		return StaticPodRefError(resource)
	}
	return nil
}

// refersTo reports whether names finds a non-empty name in spec.
func refersTo(spec *v1.PodSpec, names func(*v1.PodSpec, func(string))) bool {
	found := false
	names(spec, func(n string) {
		if n != "" {
			found = true
		}
	})
	return found
}

// eachContainer calls f for every container of spec: init, regular and
// ephemeral (upstream's AllContainers).
func eachContainer(spec *v1.PodSpec, f func(c *v1.Container)) {
	for i := range spec.InitContainers {
		f(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		f(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		c := v1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		f(&c)
	}
}

// secretNames visits every Secret name spec refers to, as upstream's
// VisitPodSecretNames.
func secretNames(spec *v1.PodSpec, visit func(string)) {
	for _, r := range spec.ImagePullSecrets {
		visit(r.Name)
	}
	eachContainer(spec, func(c *v1.Container) {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				visit(e.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				visit(e.ValueFrom.SecretKeyRef.Name)
			}
		}
	})
	for i := range spec.Volumes {
		s := &spec.Volumes[i].VolumeSource
		switch {
		case s.AzureFile != nil:
			visit(s.AzureFile.SecretName)
		case s.CephFS != nil && s.CephFS.SecretRef != nil:
			visit(s.CephFS.SecretRef.Name)
		case s.Cinder != nil && s.Cinder.SecretRef != nil:
			visit(s.Cinder.SecretRef.Name)
		case s.FlexVolume != nil && s.FlexVolume.SecretRef != nil:
			visit(s.FlexVolume.SecretRef.Name)
		case s.Projected != nil:
			for _, src := range s.Projected.Sources {
				if src.Secret != nil {
					visit(src.Secret.Name)
				}
			}
		case s.RBD != nil && s.RBD.SecretRef != nil:
			visit(s.RBD.SecretRef.Name)
		case s.Secret != nil:
			visit(s.Secret.SecretName)
		case s.ScaleIO != nil && s.ScaleIO.SecretRef != nil:
			visit(s.ScaleIO.SecretRef.Name)
		case s.ISCSI != nil && s.ISCSI.SecretRef != nil:
			visit(s.ISCSI.SecretRef.Name)
		case s.StorageOS != nil && s.StorageOS.SecretRef != nil:
			visit(s.StorageOS.SecretRef.Name)
		case s.CSI != nil && s.CSI.NodePublishSecretRef != nil:
			visit(s.CSI.NodePublishSecretRef.Name)
		}
	}
}

// configMapNames visits every ConfigMap name spec refers to, as upstream's
// VisitPodConfigmapNames.
func configMapNames(spec *v1.PodSpec, visit func(string)) {
	eachContainer(spec, func(c *v1.Container) {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				visit(e.ConfigMapRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				visit(e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	})
	for i := range spec.Volumes {
		s := &spec.Volumes[i].VolumeSource
		switch {
		case s.Projected != nil:
			for _, src := range s.Projected.Sources {
				if src.ConfigMap != nil {
					visit(src.ConfigMap.Name)
				}
			}
		case s.ConfigMap != nil:
			visit(s.ConfigMap.Name)
		}
	}
}
