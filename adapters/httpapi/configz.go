package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// NewConfigz serves GET /configz as upstream's kubelet does: the effective
// configuration as a kubelet.config.k8s.io/v1beta1 KubeletConfiguration
// under the key "kubeletconfig" ({"kubeletconfig": {...}}). The
// configuration is fixed for the process's life: it is encoded once, here.
// Mount it on the main port only (authorization subresource configz).
func NewConfigz(cfg *kubeletconfig.KubeletConfiguration) (http.Handler, error) {
	if cfg == nil {
		return nil, fmt.Errorf("httpapi: configz: no configuration")
	}
	b, err := json.Marshal(map[string]*kubeletconfig.KubeletConfiguration{"kubeletconfig": cfg})
	if err != nil {
		return nil, fmt.Errorf("httpapi: configz: %w", err)
	}
	b = append(b, '\n')
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}), nil
}
