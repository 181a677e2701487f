package podspec

import "k8s.io/apimachinery/pkg/types"

// PodCertificateRequest is what the node asks of a signer for one
// podCertificate projection of a pod (the VolumeActor asks, the kube
// adapter creates the certificates.k8s.io/v1 PodCertificateRequest).
type PodCertificateRequest struct {
	Namespace, PodName string
	PodUID             types.UID
	ServiceAccount     string
	SignerName         string
	KeyType            string
	MaxExpiration      *int32
	UserAnnotations    map[string]string
}
