// Package manifest decodes, validates and defaults pod manifests for the
// static-pod sources (a directory, a URL) and the node API's push endpoint.
//
// It is pure code plus the file and HTTP reads the sources need; it imports
// Kubernetes types but neither actors nor messages.
package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
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

// Document is a pod decoded from a manifest and its place there.
type Document struct {
	Pod *v1.Pod
	// Index is the document's number in its manifest, from 1: YAML
	// documents as separated by "---" lines, or concatenated JSON objects.
	Index int
}

// DocumentError is a document of a manifest left out: it did not decode,
// or (from the listers) the pod it holds is invalid.
type DocumentError struct {
	Index int // from 1, as Document.Index
	Err   error
}

func (e *DocumentError) Error() string { return fmt.Sprintf("document %d: %v", e.Index, e.Err) }

func (e *DocumentError) Unwrap() error { return e.Err }

// Decode reads one or more YAML or JSON documents (YAML separated by "---",
// JSON objects concatenated). Each document is a Pod, a PodList or a List of
// pods. Unknown fields are ignored, as the upstream kubelet does; a document
// that is not an object, an unknown kind or apiVersion, or a field of the
// wrong type is an error. Empty documents are skipped.
//
// Decode is all or nothing: any bad document is an error and gives no pods
// (the push endpoint wants exactly one pod). DecodeDocuments keeps the good
// documents of a manifest with bad ones.
func Decode(data []byte) ([]*v1.Pod, error) {
	docs, errs := DecodeDocuments(data)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var pods []*v1.Pod
	for _, d := range docs {
		pods = append(pods, d.Pod)
	}
	return pods, nil
}

// DecodeDocuments decodes each document of data on its own: the pods of the
// documents that decode, and a *DocumentError for each that does not. A bad
// YAML document does not hide the documents after it; in a stream of JSON
// objects, a syntax error ends the stream (what follows it cannot be found
// again), so it is the last error.
func DecodeDocuments(data []byte) ([]Document, []error) {
	if utilyaml.IsJSONBuffer(data) {
		return decodeJSONStream(data)
	}
	var (
		docs []Document
		errs []error
	)
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for index := 1; ; index++ {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil { // reading a byte slice: cannot happen, but never loop on it
			errs = append(errs, &DocumentError{Index: index, Err: err})
			break
		}
		raw, err := yaml.YAMLToJSON(chunk)
		if err != nil {
			errs = append(errs, &DocumentError{Index: index, Err: err})
			continue
		}
		docs, errs = addDocument(docs, errs, index, raw)
	}
	return docs, errs
}

// decodeJSONStream decodes concatenated JSON objects (the stream decoder
// also takes a JSON object followed by YAML, as kubectl does).
func decodeJSONStream(data []byte) ([]Document, []error) {
	var (
		docs []Document
		errs []error
	)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for index := 1; ; index++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, &DocumentError{Index: index, Err: err})
			break
		}
		docs, errs = addDocument(docs, errs, index, raw)
	}
	return docs, errs
}

// addDocument decodes one document's JSON; an empty one adds nothing.
func addDocument(docs []Document, errs []error, index int, raw []byte) ([]Document, []error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return docs, errs
	}
	got, err := decodeObject(raw)
	if err != nil {
		return docs, append(errs, &DocumentError{Index: index, Err: err})
	}
	for _, p := range got {
		docs = append(docs, Document{Pod: p, Index: index})
	}
	return docs, errs
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
