package server

import (
	"bytes"
	"strconv"
	"testing"

	json "github.com/go-json-experiment/json/v1"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// hostileShape is an object of about 2.9 MB (under the 3 MiB limit)
// whose field holds many small values of one shape, the bodies that cost
// the most decoded per byte.
func hostileShape(field, shape string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"metadata":{"name":"flood"},"spec":{"` + field + `":`)
	open, closing := byte('['), byte(']')
	if shape == "keys" {
		open, closing = '{', '}'
	}
	b.WriteByte(open)
	for i := 0; b.Len() < 2_900_000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		switch shape {
		case "numbers":
			b.WriteByte('1')
		case "empty objects":
			b.WriteString("{}")
		case "empty arrays":
			b.WriteString("[]")
		case "keys":
			b.WriteString(`"` + strconv.FormatInt(int64(i), 36) + `":"1"`)
		case "nesting":
			// 9,000 deep, under the decoders' 10,000 limit.
			b.WriteString(strings9000("[") + strings9000("]"))
		}
	}
	b.WriteByte(closing)
	b.WriteString(`}}`)
	return b.Bytes()
}

func strings9000(s string) string { return string(bytes.Repeat([]byte(s), 9000)) }

// BenchmarkDecodeCost measures what each module's decoder allocates per
// structural token of the worst JSON shapes (module.Cost.BytesPerToken):
//
//	go test ./internal/server -run '^$' -bench DecodeCost -benchtime 3x
//
// maps: configcheck's watched objects (and the default); Pod: placement's
// Pod webhook; review: the server's own AdmissionReview decode (1 byte per
// byte: the object stays raw).
func BenchmarkDecodeCost(b *testing.B) {
	decoders := map[string]func([]byte) error{
		"maps": func(raw []byte) error {
			var m map[string]any
			return utiljson.Unmarshal(raw, &m)
		},
		"Pod": func(raw []byte) error {
			var p corev1.Pod
			return json.Unmarshal(raw, &p)
		},
		"review": func(raw []byte) error {
			var r admissionv1.AdmissionReview
			return json.Unmarshal(append(append([]byte(`{"request":{"uid":"u","object":`), raw...), '}', '}'), &r)
		},
	}
	for _, decoder := range []string{"maps", "Pod", "review"} {
		field := "x"
		if decoder == "Pod" {
			field = "containers"
		}
		for _, shape := range []string{"numbers", "empty objects", "empty arrays", "keys", "nesting"} {
			if decoder == "Pod" && shape != "empty objects" {
				continue
			}
			body := hostileShape(field, shape)
			tokens := structuralTokens(body)
			b.Run(decoder+"/"+shape, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if err := decoders[decoder](body); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(tokens), "tokens")
			})
		}
	}
}
