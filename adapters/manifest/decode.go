// Package manifest decodes, validates and defaults pod manifests for the
// static-pod sources (a directory, a URL) and the node API's push endpoint.
//
// It is pure code plus the file and HTTP reads the sources need; it imports
// Kubernetes types but neither actors nor messages.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// typeMeta is what Decode reads first to dispatch on kind.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// rawList is a List or PodList whose items are decoded one by one.
type rawList struct {
	Items []json.RawMessage `json:"items"`
}

// Decode reads one or more YAML or JSON documents (YAML separated by "---",
// JSON objects concatenated). Each document is a Pod, a PodList or a List of
// pods. Unknown fields are ignored, as the upstream kubelet does; a document
// that is not an object, an unknown kind or apiVersion, or a field of the
// wrong type is an error. Empty documents are skipped.
func Decode(data []byte) ([]*v1.Pod, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var pods []*v1.Pod
	for doc := 0; ; doc++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		got, err := decodeObject(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		pods = append(pods, got...)
	}
	return pods, nil
}

func decodeObject(raw json.RawMessage) ([]*v1.Pod, error) {
	if raw[0] != '{' {
		return nil, fmt.Errorf("not an object: %s", abbrev(raw))
	}
	var tm typeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("decode type: %w", err)
	}
	switch tm.Kind {
	case "Pod":
		if err := checkAPIVersion(tm.APIVersion); err != nil {
			return nil, err
		}
		pod, err := decodePod(raw)
		if err != nil {
			return nil, err
		}
		return []*v1.Pod{pod}, nil
	case "PodList", "List":
		if err := checkAPIVersion(tm.APIVersion); err != nil {
			return nil, err
		}
		var l rawList
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, fmt.Errorf("decode %s: %w", tm.Kind, err)
		}
		pods := make([]*v1.Pod, 0, len(l.Items))
		for i, item := range l.Items {
			item = bytes.TrimSpace(item)
			if len(item) == 0 || item[0] != '{' {
				return nil, fmt.Errorf("items[%d]: not an object", i)
			}
			var itm typeMeta
			if err := json.Unmarshal(item, &itm); err != nil {
				return nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			// A PodList's items may omit their kind; a List's must say Pod.
			if itm.Kind != "Pod" && (itm.Kind != "" || tm.Kind == "List") {
				return nil, fmt.Errorf("items[%d]: kind %q is not supported, want Pod", i, itm.Kind)
			}
			if itm.APIVersion != "" {
				if err := checkAPIVersion(itm.APIVersion); err != nil {
					return nil, fmt.Errorf("items[%d]: %w", i, err)
				}
			}
			pod, err := decodePod(item)
			if err != nil {
				return nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			pods = append(pods, pod)
		}
		return pods, nil
	case "":
		return nil, errors.New("kind: Required value")
	default:
		return nil, fmt.Errorf("kind: Unsupported value: %q: supported values: \"Pod\", \"PodList\", \"List\"", tm.Kind)
	}
}

func checkAPIVersion(v string) error {
	if v != "v1" {
		return fmt.Errorf("apiVersion: Unsupported value: %q: supported values: \"v1\"", v)
	}
	return nil
}

func decodePod(raw json.RawMessage) (*v1.Pod, error) {
	pod := &v1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fmt.Errorf("%s: Invalid value: %s is not a valid %s", te.Field, te.Value, te.Type)
		}
		return nil, fmt.Errorf("decode pod: %w", err)
	}
	pod.Kind, pod.APIVersion = "Pod", "v1"
	return pod, nil
}

func abbrev(b []byte) string {
	const limit = 40
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}
