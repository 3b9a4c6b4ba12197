package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// YAMLDocuments splits a multi-document YAML stream into its non-empty
// documents.
func YAMLDocuments(data []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if trimmed := bytes.TrimSpace(doc); len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("---")) {
			docs = append(docs, doc)
		}
	}
}
